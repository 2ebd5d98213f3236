// Package v1beta1 describes the part of Cluster API Provider Hetzner's
// infrastructure.cluster.x-k8s.io/v1beta1 API (HetznerCluster and
// HCloudMachineTemplate) that bex's cluster template
// (deploy/capi/hetzner/cluster-template.yaml) writes, written from CAPH's
// documented API because CAPH's Go module is not on the module proxy.
//
// It holds types only, for controller-gen: hack/generate-install-crds.sh
// turns them into the CRDs test/install installs, so that the template's
// HetznerCluster and HCloudMachineTemplates are dry-run with unknown fields
// refused and their enums, bounds and required fields checked. Fields the
// template does not use are left out on purpose: a template that starts using
// one fails the dry-run until it is described here, against CAPH's reference.
// A real management cluster gets CAPH's own CRDs from clusterctl.
//
// +groupName=infrastructure.cluster.x-k8s.io
package v1beta1
