// Package capi runs Cluster API's own controllers against a management
// apiserver on this machine: the core manager (kubebin.CAPIManager), the
// kubeadm bootstrap provider (kubebin.CAPIKubeadmBootstrapManager) and the
// KubeadmControlPlane controller (kubebin.CAPIKubeadmControlPlaneManager),
// each built by internal/kubebin at its pinned version and run as a child
// process.
//
// Start installs what clusterctl would install with them, from the source of
// the sigs.k8s.io/cluster-api module at the managers' version (the Go module
// cache, found through kubebin's recipe), without kustomize and without
// cert-manager:
//
//   - the CRDs of <manager>/config/crd/bases with the labels its
//     kustomization adds (the contract labels cluster.x-k8s.io/v1beta2 of
//     the bootstrap and control-plane CRDs), and the conversion webhook its
//     patches add, pointed at the manager that serves the kind;
//   - the ValidatingWebhookConfiguration and MutatingWebhookConfiguration of
//     <manager>/config/webhook/manifests.yaml, named with clusterctl's
//     prefixes (capi-, capi-kubeadm-bootstrap-, capi-kubeadm-control-plane-);
//     every webhook's clientConfig is a URL on 127.0.0.1 and the manager's own
//     webhook port instead of a Service.
//
// Each manager serves its webhooks on a port of its own (the managers'
// default, 9443, would collide) with a serving certificate for 127.0.0.1 and
// localhost that a CA of this package signs (internal/pki); the CA is the
// caBundle of every webhook and conversion. Its health endpoint listens on
// 127.0.0.1 on a port of its own. Start returns once every manager's
// /readyz answers 200 and the apiserver calls the webhooks (a dry-run
// KubeadmControlPlane comes back defaulted, and an invalid one is denied):
// until then the apiserver would admit Cluster API objects undefaulted. Leader
// election is off (one replica each), the diagnostics (metrics) endpoint is
// off, the CRD migrator's phases are skipped (the CRDs are installed at the
// managers' version; nothing stored needs migrating), and the feature gates
// are pinned on the command line rather than left to the managers' defaults:
// MachinePool, ClusterTopology, RuntimeSDK, InPlaceUpdates and
// MachineTaintPropagation off.
//
// Under Options.Dir it keeps the CA (pki/), each manager's serving
// certificate (<manager>/serving-certs/), the CRDs and webhook
// configurations exactly as applied (manifests/), and each manager's log
// (logs/<manager>.log, appended across starts). Stop sends SIGTERM to every
// manager, SIGKILL after the grace period; it leaves the CRDs and webhook
// configurations in place, as a management cluster whose controllers are
// down keeps them, so that writes of Cluster API objects fail until the
// managers run again, and the next Start points them at the new ports.
//
// The infrastructure provider these controllers need for machines of their
// own is not here (docs/fleet.md says what is left of issue 18).
package capi
