package localinfra

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/internal/controlplane"
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
	// WorkerReplicas is the number of worker machines, of a
	// MachineDeployment <name>-md-0; each runs bex-node. Zero makes no
	// MachineDeployment.
	WorkerReplicas int32
	// WorkerLabels and WorkerTaints are the workers' Node labels and
	// taints, in the KubeadmConfigTemplate's
	// joinConfiguration.nodeRegistration (kubeletExtraArgs node-labels,
	// taints) as for any kubeadm worker. None by default: kubeadm gives a
	// worker none (no node-role label either), nor do CAPH's templates.
	WorkerLabels map[string]string
	WorkerTaints []corev1.Taint
	// APIServerExtraArgs are the KubeadmControlPlane's
	// clusterConfiguration.apiServer.extraArgs.
	APIServerExtraArgs []bootstrapv1.Arg
	// Files are the KubeadmControlPlane's kubeadmConfigSpec.files, which
	// every control-plane machine writes before its components start
	// (an audit policy that APIServerExtraArgs name, say).
	Files []bootstrapv1.File
	// Labels are the Cluster's (a FleetUpgrade selects clusters by them).
	Labels map[string]string
	// Plane, when set, makes the cluster take over that running control
	// plane (the LocalCluster's spec.plane): PlaneEtcdURL is the plane's
	// etcd's client URL, the KubeadmControlPlane's external etcd, and
	// PlaneAuthorities its authorities, written as the <cluster>-ca,
	// -proxy and -sa Secrets that Cluster API takes in place of generating
	// them, so that what the plane issued stays valid on the machines.
	Plane            string
	PlaneEtcdURL     string
	PlaneAuthorities *controlplane.Authorities
}

// Kubeadm's paths of the external etcd's files, which the kubeadm
// bootstrap provider writes from the etcd Secrets.
const (
	etcdCAFile     = "/etc/kubernetes/pki/etcd/ca.crt"
	etcdClientCert = "/etc/kubernetes/pki/apiserver-etcd-client.crt"
	etcdClientKey  = "/etc/kubernetes/pki/apiserver-etcd-client.key"
)

// Blocks returns the address blocks the LocalClusters hold, for
// localfleet.FreeBlock to leave out.
func Blocks(lcs []infrav1.LocalCluster) []netip.Prefix {
	var used []netip.Prefix
	for _, lc := range lcs {
		if p, err := netip.ParsePrefix(lc.Spec.AddressBlock); err == nil {
			used = append(used, p)
		}
	}
	return used
}

// ClusterObjects returns the objects of a local cluster, in the order to
// create them: for a cluster that takes over a plane its authorities'
// Secrets, the LocalCluster, the LocalMachineTemplate, the
// KubeadmControlPlane (maxSurge 0, external etcd, every default set
// explicitly so that it means the same with or without Cluster API's
// webhooks, CoreDNS and kube-proxy not managed), with workers their
// LocalMachineTemplate, KubeadmConfigTemplate and MachineDeployment, and
// the Cluster, last.
func ClusterObjects(o ClusterOptions) []client.Object {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: o.Namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: o.Name}}
	}
	lc := &infrav1.LocalCluster{ObjectMeta: meta(o.Name), Spec: infrav1.LocalClusterSpec{AddressBlock: o.Block.String(), Plane: o.Plane}}
	tmpl := &infrav1.LocalMachineTemplate{ObjectMeta: meta(o.Name + "-control-plane")}
	etcd := "https://" + netip.AddrPortFrom(localfleet.EtcdAddr(o.Block), localfleet.EtcdClientPort).String()
	if o.Plane != "" {
		etcd = o.PlaneEtcdURL
	}
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
				Files:  o.Files,
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
	var objs []client.Object
	if a := o.PlaneAuthorities; o.Plane != "" && a != nil {
		for _, s := range []struct {
			purpose  string
			crt, key []byte
		}{{"ca", a.CACert, a.CAKey}, {"proxy", a.FrontProxyCACert, a.FrontProxyCAKey}, {"sa", a.ServiceAccountPub, a.ServiceAccountKey}} {
			objs = append(objs, &corev1.Secret{ObjectMeta: meta(o.Name + "-" + s.purpose), Type: clusterv1.ClusterSecretType,
				Data: map[string][]byte{corev1.TLSCertKey: s.crt, corev1.TLSPrivateKeyKey: s.key}})
		}
	}
	objs = append(objs, lc, tmpl, kcp)
	if o.WorkerReplicas > 0 {
		objs = append(objs, workerObjects(o, meta)...)
	}
	return append(objs, cluster)
}

// workerObjects returns a MachineDeployment of o.WorkerReplicas workers
// and its templates, every default set explicitly as for the control
// plane: a rolling update with maxSurge 0 and maxUnavailable 1 (no spare
// machine, as for the control plane), machines deleted oldest first.
func workerObjects(o ClusterOptions, meta func(string) metav1.ObjectMeta) []client.Object {
	name := o.Name + "-md-0"
	tmpl := &infrav1.LocalMachineTemplate{ObjectMeta: meta(name)}
	config := &bootstrapv1.KubeadmConfigTemplate{ObjectMeta: meta(name), Spec: bootstrapv1.KubeadmConfigTemplateSpec{
		Template: bootstrapv1.KubeadmConfigTemplateResource{Spec: bootstrapv1.KubeadmConfigSpec{
			Format:            bootstrapv1.CloudConfig,
			JoinConfiguration: bootstrapv1.JoinConfiguration{NodeRegistration: workerNodeRegistration(o)},
		}},
	}}
	maxSurge, maxUnavailable := intstr.FromInt32(0), intstr.FromInt32(1)
	labels := map[string]string{clusterv1.ClusterNameLabel: o.Name, clusterv1.MachineDeploymentNameLabel: name}
	md := &clusterv1.MachineDeployment{
		ObjectMeta: meta(name),
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: o.Name,
			Replicas:    &o.WorkerReplicas,
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable,
				},
			}},
			Deletion: clusterv1.MachineDeploymentDeletionSpec{Order: clusterv1.OldestMachineSetDeletionOrder},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{
					ClusterName: o.Name,
					Version:     o.Version,
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfigTemplate", Name: config.Name,
					}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.LocalMachineTemplateKind, Name: tmpl.Name,
					},
				},
			},
		},
	}
	return []client.Object{tmpl, config, md}
}

// workerNodeRegistration is the workers' nodeRegistration: o's labels as
// the kubelet's node-labels, o's taints (nil, kubeadm's default for a
// worker, when there are none).
func workerNodeRegistration(o ClusterOptions) bootstrapv1.NodeRegistrationOptions {
	var nr bootstrapv1.NodeRegistrationOptions
	if len(o.WorkerLabels) > 0 {
		kvs := make([]string, 0, len(o.WorkerLabels))
		for _, k := range slices.Sorted(maps.Keys(o.WorkerLabels)) {
			kvs = append(kvs, k+"="+o.WorkerLabels[k])
		}
		nr.KubeletExtraArgs = []bootstrapv1.Arg{{Name: "node-labels", Value: ptr.To(strings.Join(kvs, ","))}}
	}
	if len(o.WorkerTaints) > 0 {
		nr.Taints = ptr.To(slices.Clone(o.WorkerTaints))
	}
	return nr
}
