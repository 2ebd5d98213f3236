// Package installcrds embeds the CRDs that the production install artifacts
// (deploy/chart/bex, deploy/capi/hetzner) use and that neither Kubernetes,
// deploy/crds nor deploy/capi-crds provide: Cluster API's MachineHealthCheck
// and KubeadmConfigTemplate, CAPH's HetznerCluster and HCloudMachineTemplate
// (the part test/install/caph/v1beta1 describes), the Prometheus operator's
// ServiceMonitor, cert-manager's Certificate and Issuer.
// hack/generate-install-crds.sh writes them. test/install installs them into
// the pinned kube-apiserver to dry-run the artifacts; a real management
// cluster gets them from clusterctl, cert-manager and the Prometheus operator.
package installcrds
