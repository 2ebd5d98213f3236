// Package apis holds the types of bex's own Kubernetes APIs, one package per
// group and version:
//
//   - platform/v1alpha1 (platform.bex.co): App and Route, the objects a tenant
//     writes to run code and expose it.
//   - fleet/v1alpha1 (fleet.bex.co): FleetUpgrade, the object an operator
//     writes to upgrade the Kubernetes version of the workload clusters.
//
// The packages hold types only: kubebuilder markers, documented condition
// types and reasons, generated deep copies and scheme registration. They import
// nothing but apimachinery, so any binary or test can use them. The CRDs in
// deploy/crds are generated from them by hack/generate.sh (make generate).
package apis
