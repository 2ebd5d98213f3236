package upgrade

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/upgrade/preflight"
)

// kcpFlags are the kube-apiserver flags a KubeadmControlPlane carries in
// clusterConfiguration.apiServer.extraArgs that preflight reads; the others
// (addresses, ports, the serving certificate) kubeadm sets per machine.
var kcpFlags = []string{
	"feature-gates",
	"peer-ca-file", "peer-advertise-ip", "peer-advertise-port",
	"proxy-client-cert-file", "proxy-client-key-file",
	"requestheader-client-ca-file", "requestheader-allowed-names",
	"requestheader-username-headers", "requestheader-group-headers", "requestheader-extra-headers-prefix",
}

// runningArgs reads a running apiserver's flags from its command line
// (/proc/PID/cmdline; the process is kube-apiserver itself, the hostname
// wrapper having exec'd it).
func runningArgs(s *controlplane.APIServer) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(s.PID()), "cmdline"))
	if err != nil {
		return nil, fmt.Errorf("reading the command line of %s: %w", s.Name, err)
	}
	argv := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
	if len(argv) == 0 || filepath.Base(argv[0]) != "kube-apiserver" {
		return nil, fmt.Errorf("process %d of %s is %q, not kube-apiserver", s.PID(), s.Name, argv[0])
	}
	args := map[string]string{}
	for _, a := range argv[1:] {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		args[name] = value
	}
	return args, nil
}

// kcpOf describes the running apiservers of cp as the KubeadmControlPlane
// that would run them: three replicas, maxSurge 0, the version they run,
// the flags of kcpFlags they carry as extraArgs (they must agree: a KCP has
// one spec), the plane's PKI directory as certificatesDir, and one Machine
// per apiserver named and hosted as the server. Preflight then decides on
// what the servers really run.
func kcpOf(cp *controlplane.ControlPlane, name string) (*controlplanev1.KubeadmControlPlane, []clusterv1.Machine, error) {
	var servers []*controlplane.APIServer
	for _, s := range cp.APIServers() {
		if s.Running() {
			servers = append(servers, s)
		}
	}
	if len(servers) == 0 {
		return nil, nil, fmt.Errorf("no apiserver runs")
	}
	var common map[string]string
	version := servers[0].Version
	for _, s := range servers {
		if s.Version != version {
			return nil, nil, fmt.Errorf("the apiservers run %s and %s: a KubeadmControlPlane mid-rollout, preflight runs before one", version, s.Version)
		}
		args, err := runningArgs(s)
		if err != nil {
			return nil, nil, err
		}
		mine := map[string]string{}
		for _, f := range kcpFlags {
			if v, ok := args[f]; ok {
				mine[f] = v
			}
		}
		if common == nil {
			common = mine
		} else if fmt.Sprint(common) != fmt.Sprint(mine) {
			return nil, nil, fmt.Errorf("the apiservers' MVP flags differ (%v on one, %v on %s): a KubeadmControlPlane has one spec", common, mine, s.Name)
		}
	}
	replicas := int32(len(servers))
	surge := intstr.FromInt32(0)
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: "upgrade-suite", Name: name},
		Spec:       controlplanev1.KubeadmControlPlaneSpec{Version: "v" + version, Replicas: &replicas},
	}
	kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = &surge
	kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.CertificatesDir = filepath.Dir(cp.CAFile())
	for _, f := range kcpFlags {
		if v, ok := common[f]; ok {
			kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs = append(
				kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs, bootstrapv1.Arg{Name: f, Value: &v})
		}
	}
	var machines []clusterv1.Machine
	for _, s := range servers {
		m := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: kcp.Namespace, Name: s.Name,
			Labels: map[string]string{clusterv1.MachineControlPlaneNameLabel: kcp.Name}}}
		m.Spec.Version = "v" + s.Version
		m.Status.NodeRef.Name = s.Name
		machines = append(machines, m)
	}
	return kcp, machines, nil
}

// runPreflight runs preflight on the KubeadmControlPlane that describes the
// running plane and returns its findings.
func runPreflight(ctx context.Context, cp *controlplane.ControlPlane, name string) ([]preflight.Finding, error) {
	kcp, machines, err := kcpOf(cp, name)
	if err != nil {
		return nil, err
	}
	// The plane's load balancer takes a server out and drains it before the
	// rollout stops it, as the hand-off does.
	return preflight.Run(ctx, preflight.Input{ControlPlane: kcp, Machines: machines, LoadBalancerHandoff: true}, nil), nil
}

// blockerText renders the Blocker findings, one a line.
func blockerText(fs []preflight.Finding) []string {
	var out []string
	for _, f := range preflight.Blockers(fs) {
		out = append(out, f.Reason+": "+f.Message)
	}
	return out
}
