package localinfra

import (
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/internal/localfleet"
)

// ClusterOptions describe a local cluster.
type ClusterOptions struct {
	Namespace, Name string
	// Version is the Kubernetes version, such as "v1.36.3".
	Version string
	// ControlPlaneReplicas is the number of control-plane machines; with
	// maxSurge 0 Cluster API requires at least three.
	ControlPlaneReplicas int32
	// Block is the cluster's loopback /24 (localfleet.FreeBlock).
	Block netip.Prefix
	// APIServerExtraArgs are the KubeadmControlPlane's
	// clusterConfiguration.apiServer.extraArgs.
	APIServerExtraArgs []bootstrapv1.Arg
	// Labels are the Cluster's (a FleetUpgrade selects clusters by them).
	Labels map[string]string
}

// Kubeadm's paths of the external etcd's files, which the kubeadm
// bootstrap provider writes from the etcd Secrets.
const (
	etcdCAFile     = "/etc/kubernetes/pki/etcd/ca.crt"
	etcdClientCert = "/etc/kubernetes/pki/apiserver-etcd-client.crt"
	etcdClientKey  = "/etc/kubernetes/pki/apiserver-etcd-client.key"
)

// ClusterObjects returns the objects of a local cluster, in the order to
// create them: the LocalCluster, the LocalMachineTemplate, the
// KubeadmControlPlane (maxSurge 0, external etcd, every default set
// explicitly so that it means the same with or without Cluster API's
// webhooks, CoreDNS and kube-proxy not managed) and the Cluster.
func ClusterObjects(o ClusterOptions) []client.Object {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: o.Namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: o.Name}}
	}
	lc := &infrav1.LocalCluster{ObjectMeta: meta(o.Name), Spec: infrav1.LocalClusterSpec{AddressBlock: o.Block.String()}}
	tmpl := &infrav1.LocalMachineTemplate{ObjectMeta: meta(o.Name + "-control-plane")}
	etcd := "https://" + netip.AddrPortFrom(localfleet.EtcdAddr(o.Block), localfleet.EtcdClientPort).String()
	kcpMeta := meta(o.Name + "-control-plane")
	kcpMeta.Annotations = map[string]string{
		controlplanev1.SkipCoreDNSAnnotation:   "",
		controlplanev1.SkipKubeProxyAnnotation: "",
	}
	maxSurge := intstr.FromInt32(0)
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: kcpMeta,
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: &o.ControlPlaneReplicas,
			Version:  o.Version,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.LocalMachineTemplateKind, Name: tmpl.Name,
					},
				},
			},
			KubeadmConfigSpec: bootstrapv1.KubeadmConfigSpec{
				Format: bootstrapv1.CloudConfig,
				ClusterConfiguration: bootstrapv1.ClusterConfiguration{
					Etcd: bootstrapv1.Etcd{External: bootstrapv1.ExternalEtcd{
						Endpoints: []string{etcd},
						CAFile:    etcdCAFile,
						CertFile:  etcdClientCert,
						KeyFile:   etcdClientKey,
					}},
					APIServer: bootstrapv1.APIServer{ExtraArgs: o.APIServerExtraArgs},
				},
			},
			Rollout: controlplanev1.KubeadmControlPlaneRolloutSpec{
				Strategy: controlplanev1.KubeadmControlPlaneRolloutStrategy{
					Type:          controlplanev1.RollingUpdateStrategyType,
					RollingUpdate: controlplanev1.KubeadmControlPlaneRolloutStrategyRollingUpdate{MaxSurge: &maxSurge},
				},
			},
		},
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, Labels: o.Labels},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.LocalClusterKind, Name: lc.Name,
			},
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: kcp.Name,
			},
		},
	}
	return []client.Object{lc, tmpl, kcp, cluster}
}
