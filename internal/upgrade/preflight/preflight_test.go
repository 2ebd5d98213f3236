package preflight_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"bex.co/bex/internal/upgrade/preflight"
)

// wiredArgs are the extraArgs of a control plane with MVP wired on 1.36+.
var wiredArgs = []string{
	"peer-ca-file=/etc/kubernetes/pki/ca.crt",
	"proxy-client-cert-file=/etc/kubernetes/pki/front-proxy-client.crt",
	"proxy-client-key-file=/etc/kubernetes/pki/front-proxy-client.key",
	"requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt",
	"requestheader-allowed-names=front-proxy-client",
	"requestheader-username-headers=X-Remote-User",
	"requestheader-group-headers=X-Remote-Group",
	"requestheader-extra-headers-prefix=X-Remote-Extra-",
	"shutdown-delay-duration=0s",
	"shutdown-send-retry-after=true",
}

func kcp(version string, replicas int32, maxSurge *int, args ...string) *controlplanev1.KubeadmControlPlane {
	k := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "c1-cp"},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Version:  version,
			Replicas: &replicas,
		},
	}
	if maxSurge != nil {
		v := intstr.FromInt32(int32(*maxSurge))
		k.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = &v
	}
	for _, a := range args {
		name, value, _ := strings.Cut(a, "=")
		k.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs = append(
			k.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs, bootstrapv1.Arg{Name: name, Value: &value})
	}
	return k
}

func intp(i int) *int { return &i }

func with(base []string, extra ...string) []string {
	out := append([]string(nil), base...)
	for _, e := range extra {
		name, _, _ := strings.Cut(e, "=")
		replaced := false
		for i, b := range out {
			if strings.HasPrefix(b, name+"=") {
				out[i], replaced = e, true
			}
		}
		if !replaced {
			out = append(out, e)
		}
	}
	return out
}

func without(base []string, name string) []string {
	var out []string
	for _, b := range base {
		if !strings.HasPrefix(b, name+"=") {
			out = append(out, b)
		}
	}
	return out
}

func machine(name, hostname string) clusterv1.Machine {
	m := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name,
		Labels: map[string]string{clusterv1.MachineControlPlaneNameLabel: "c1-cp"}}}
	m.Status.NodeRef.Name = hostname
	return m
}

func machines(n int) []clusterv1.Machine {
	var out []clusterv1.Machine
	for i := range n {
		out = append(out, machine(fmt.Sprintf("c1-cp-%d", i), fmt.Sprintf("c1-cp-%d", i)))
	}
	return out
}

type fakeCapacity struct {
	answer preflight.SurgeCapacity
	err    error
	calls  int
}

func (f *fakeCapacity) SurgeCapacity(context.Context, *clusterv1.Cluster, *controlplanev1.KubeadmControlPlane) (preflight.SurgeCapacity, error) {
	f.calls++
	return f.answer, f.err
}

func reasons(fs []preflight.Finding, sev preflight.Severity) []string {
	var out []string
	for _, f := range fs {
		if f.Severity == sev {
			out = append(out, f.Reason)
		}
	}
	return out
}

func find(fs []preflight.Finding, reason string) (preflight.Finding, bool) {
	for _, f := range fs {
		if f.Reason == reason {
			return f, true
		}
	}
	return preflight.Finding{}, false
}

// run runs preflight on a cluster with the load-balancer hand-off, as the
// platform's Hetzner clusters have it.
func run(k *controlplanev1.KubeadmControlPlane, ms []clusterv1.Machine, c preflight.Capacity) []preflight.Finding {
	return preflight.Run(context.Background(), preflight.Input{Cluster: &clusterv1.Cluster{}, ControlPlane: k, Machines: ms, LoadBalancerHandoff: true}, c)
}

// Without the hand-off nothing takes a stopping apiserver out of the load
// balancer: the shutdown delay is what keeps new connections working, so
// its absence is the warning, and with MVP wired the message says what the
// delay costs.
func TestShutdownDelayWithoutHandoff(t *testing.T) {
	noHandoff := func(k *controlplanev1.KubeadmControlPlane) []preflight.Finding {
		return preflight.Run(context.Background(), preflight.Input{Cluster: &clusterv1.Cluster{}, ControlPlane: k, Machines: machines(3)}, nil)
	}
	fs := noHandoff(kcp("v1.37.2", 3, intp(0), wiredArgs...))
	if got := reasons(fs, preflight.Warning); !reflect.DeepEqual(got, []string{preflight.ReasonShutdownDelayUnset}) {
		t.Fatalf("warnings = %v, want ShutdownDelayUnset\n%s", got, dump(fs))
	}
	f, _ := find(fs, preflight.ReasonShutdownDelayUnset)
	for _, want := range []string{"nothing takes an apiserver out of the load balancer", "health-check interval", "answers 503 to every request it would proxy"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("message %q lacks %q", f.Message, want)
		}
	}
	if !strings.Contains(f.Evidence, "no load-balancer hand-off") {
		t.Errorf("evidence %q does not say there is no hand-off", f.Evidence)
	}
	fs = noHandoff(kcp("v1.37.2", 3, intp(0), with(wiredArgs, "shutdown-delay-duration=5s")...))
	if got := reasons(fs, preflight.Warning); len(got) != 0 {
		t.Errorf("a delay without the hand-off: warnings %v, want none\n%s", got, dump(fs))
	}
	if f, ok := find(fs, preflight.ReasonGracefulShutdown); !ok || f.Severity != preflight.Info {
		t.Errorf("a delay without the hand-off: no Info GracefulShutdown\n%s", dump(fs))
	}
}

func TestWiredControlPlanePasses(t *testing.T) {
	for _, v := range []string{"v1.36.3", "v1.37.2"} {
		fs := run(kcp(v, 3, intp(0), wiredArgs...), machines(3), nil)
		if bs := preflight.Blockers(fs); len(bs) != 0 {
			t.Errorf("%s: blockers %+v", v, bs)
		}
		if ws := reasons(fs, preflight.Warning); len(ws) != 0 {
			t.Errorf("%s: warnings %v", v, ws)
		}
		wired, _ := preflight.MVPWired(kcp(v, 3, intp(0), wiredArgs...))
		if !wired {
			t.Errorf("%s: MVPWired = false", v)
		}
	}
	// On 1.35 the same flags and the gate.
	fs := run(kcp("v1.35.4", 3, intp(0), with(wiredArgs, "feature-gates=UnknownVersionInteroperabilityProxy=true")...), machines(3), nil)
	if bs := preflight.Blockers(fs); len(bs) != 0 {
		t.Errorf("1.35 with gate: blockers %+v", bs)
	}
}

// A KCP with no extraArgs at all: every flag MVP reads is named, the peer CA
// is the Blocker (kubeadm never sets it) and the others are kubeadm's
// defaults.
func TestBareControlPlaneNamesEachFlag(t *testing.T) {
	fs := run(kcp("v1.36.3", 3, intp(0)), machines(3), nil)
	wired, mvp := preflight.MVPWired(kcp("v1.36.3", 3, intp(0)))
	if wired {
		t.Errorf("MVPWired = true without --peer-ca-file")
	}
	for _, set := range [][]preflight.Finding{fs, mvp} {
		if got := reasons(set, preflight.Blocker); !reflect.DeepEqual(got, []string{preflight.ReasonPeerCAFileMissing}) {
			t.Errorf("blockers = %v", got)
		}
		for _, flag := range []string{"peer-ca-file", "proxy-client-cert-file", "proxy-client-key-file", "requestheader-client-ca-file",
			"requestheader-allowed-names", "requestheader-username-headers", "requestheader-group-headers", "requestheader-extra-headers-prefix"} {
			named := false
			for _, f := range set {
				if f.Check == preflight.CheckMVPWiring && strings.Contains(f.Message, "--"+flag+" ") && strings.Contains(f.Evidence, flag+" not in extraArgs") {
					named = true
				}
			}
			if !named {
				t.Errorf("no finding names the missing --%s", flag)
			}
		}
	}
	f, _ := find(fs, preflight.ReasonPeerCAFileMissing)
	if !f.FixedByWireMVP || !strings.Contains(f.Message, "{name: peer-ca-file, value: /etc/kubernetes/pki/ca.crt}") {
		t.Errorf("peer CA finding = %+v", f)
	}
	if !preflight.OnlyWireMVPBlockers(fs) {
		t.Errorf("the wire-MVP step should fix every blocker of a bare control plane")
	}
}

func TestFindings(t *testing.T) {
	selfSigned := func(dns ...string) string {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kube-apiserver"},
			DNSNames: dns, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
		der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	withFile := func(k *controlplanev1.KubeadmControlPlane, path, content string) *controlplanev1.KubeadmControlPlane {
		k.Spec.KubeadmConfigSpec.Files = append(k.Spec.KubeadmConfigSpec.Files, bootstrapv1.File{Path: path, Content: content})
		return k
	}
	tests := []struct {
		name     string
		kcp      *controlplanev1.KubeadmControlPlane
		machines []clusterv1.Machine
		capacity *fakeCapacity
		blockers []string
		warnings []string
		// info reasons that must be present
		info []string
		// substrings of the message of the msgReason finding (default:
		// blockers[0], else warnings[0])
		message   []string
		msgReason string
		wire      bool
	}{
		{
			name:      "1.35 without the gate",
			kcp:       kcp("v1.35.4", 3, intp(0), without(wiredArgs, "peer-ca-file")...),
			blockers:  []string{preflight.ReasonPeerCAFileMissing, preflight.ReasonFeatureGateOff},
			msgReason: preflight.ReasonFeatureGateOff,
			message:   []string{"1.35", "alpha and off by default", "Turn the gate on in a rollout of its own first", "spec.wireMVP"},
			wire:      true,
		},
		{
			name:     "1.35 with peer flags and no gate: the apiserver refuses to start",
			kcp:      kcp("v1.35.4", 3, intp(0), wiredArgs...),
			blockers: []string{preflight.ReasonFeatureGateOff, preflight.ReasonPeerFlagsWithGateOff},
			wire:     true,
		},
		{
			name:     "1.36 with the gate set false",
			kcp:      kcp("v1.36.3", 3, intp(0), with(wiredArgs, "feature-gates=UnknownVersionInteroperabilityProxy=false")...),
			blockers: []string{preflight.ReasonFeatureGateDisabled, preflight.ReasonPeerFlagsWithGateOff},
			message:  []string{"remove UnknownVersionInteroperabilityProxy=false"},
			wire:     true,
		},
		{
			name:     "APIServerIdentity off",
			kcp:      kcp("v1.37.2", 3, intp(0), with(wiredArgs, "feature-gates=APIServerIdentity=false")...),
			blockers: []string{preflight.ReasonAPIServerIdentityDisabled},
			wire:     true,
		},
		{
			name:     "feature-gates garbage",
			kcp:      kcp("v1.37.2", 3, intp(0), with(wiredArgs, "feature-gates=UnknownVersionInteroperabilityProxy")...),
			blockers: []string{preflight.ReasonFeatureGatesInvalid},
		},
		{
			name:     "mixed control plane counts as its oldest version",
			kcp:      withVersions(kcp("v1.36.3", 3, intp(0), wiredArgs...), "v1.35.4", "v1.36.3"),
			blockers: []string{preflight.ReasonFeatureGateOff, preflight.ReasonPeerFlagsWithGateOff},
			wire:     true,
		},
		{
			name:     "allowed names without the proxy CN",
			kcp:      kcp("v1.37.2", 3, intp(0), with(wiredArgs, "requestheader-allowed-names=aggregator")...),
			blockers: []string{preflight.ReasonRequestHeaderAllowedNamesExcludeProxy},
			message:  []string{`Set it to "aggregator,front-proxy-client"`},
			wire:     true,
		},
		{
			name: "allowed names empty means any",
			kcp:  kcp("v1.37.2", 3, intp(0), with(wiredArgs, "requestheader-allowed-names=")...),
		},
		{
			name:     "username header changed",
			kcp:      kcp("v1.37.2", 3, intp(0), with(wiredArgs, "requestheader-username-headers=X-Forwarded-User")...),
			blockers: []string{preflight.ReasonRequestHeaderUsernameHeadersMismatch},
			wire:     true,
		},
		{
			name:     "group and extra headers changed",
			kcp:      kcp("v1.37.2", 3, intp(0), with(wiredArgs, "requestheader-group-headers=X-G", "requestheader-extra-headers-prefix=X-E-")...),
			blockers: []string{preflight.ReasonRequestHeaderGroupHeadersMismatch, preflight.ReasonRequestHeaderExtraHeadersPrefixMismatch},
			wire:     true,
		},
		{
			name:     "proxy client cert set empty",
			kcp:      kcp("v1.37.2", 3, intp(0), with(wiredArgs, "proxy-client-cert-file=", "proxy-client-key-file=")...),
			blockers: []string{preflight.ReasonProxyClientCertFileMissing, preflight.ReasonProxyClientKeyFileMissing},
			wire:     true,
		},
		{
			name:     "requestheader CA set empty",
			kcp:      kcp("v1.37.2", 3, intp(0), with(wiredArgs, "requestheader-client-ca-file=")...),
			blockers: []string{preflight.ReasonRequestHeaderClientCAFileMissing},
			wire:     true,
		},
		{
			name:     "peer CA other than the cluster CA",
			kcp:      kcp("v1.37.2", 3, intp(0), with(wiredArgs, "peer-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt")...),
			warnings: []string{preflight.ReasonPeerCAFileNotClusterCA},
		},
		{
			name:     "peer advertise ip without port",
			kcp:      kcp("v1.37.2", 1, intp(1), with(wiredArgs, "peer-advertise-ip=10.0.0.5")...),
			capacity: &fakeCapacity{answer: preflight.SurgeCapacity{Available: true, Message: "ok"}},
			warnings: []string{preflight.ReasonPeerAdvertiseIncomplete},
			message:  []string{"Set both or neither"},
		},
		{
			name:     "peer advertise ip shared by three machines",
			kcp:      kcp("v1.37.2", 3, intp(0), with(wiredArgs, "peer-advertise-ip=10.0.0.5", "peer-advertise-port=6443")...),
			blockers: []string{preflight.ReasonPeerAdvertiseIPShared},
		},
		{
			name: "custom serving cert with the name",
			kcp: withFile(kcp("v1.37.2", 3, intp(0), with(wiredArgs, "tls-cert-file=/etc/bex/serving.crt")...),
				"/etc/bex/serving.crt", selfSigned("api.example.com", "kubernetes.default.svc")),
			info: []string{preflight.ReasonServingCertificateNamed},
		},
		{
			name: "custom serving cert without the name",
			kcp: withFile(kcp("v1.37.2", 3, intp(0), with(wiredArgs, "tls-cert-file=/etc/bex/serving.crt")...),
				"/etc/bex/serving.crt", selfSigned("api.example.com")),
			blockers: []string{preflight.ReasonServingCertificateMissingName},
			message:  []string{"does not carry kubernetes.default.svc"},
		},
		{
			name:     "custom serving cert the KCP does not show",
			kcp:      kcp("v1.37.2", 3, intp(0), with(wiredArgs, "tls-cert-file=/etc/bex/serving.crt")...),
			warnings: []string{preflight.ReasonServingCertificateUnverified},
		},
		{
			name: "default serving cert",
			kcp:  kcp("v1.37.2", 3, intp(0), wiredArgs...),
			info: []string{preflight.ReasonServingCertificateKubeadm, preflight.ReasonHostnamesUnique, preflight.ReasonMaxSurgeZero, preflight.ReasonSurgeCapacityNotNeeded},
		},
		{
			name:     "two machines one hostname",
			kcp:      kcp("v1.37.2", 3, intp(0), wiredArgs...),
			machines: []clusterv1.Machine{machine("m1", "cp"), machine("m2", "cp"), machine("m3", "cp-3")},
			blockers: []string{preflight.ReasonDuplicateHostname},
			message:  []string{"m1, m2", "identity lease is per hostname"},
		},
		{
			name: "hostname from the Hostname address; other control planes ignored",
			kcp:  kcp("v1.37.2", 3, intp(0), wiredArgs...),
			machines: func() []clusterv1.Machine {
				a := machine("m1", "")
				a.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineHostName, Address: "cp-1"}}
				other := machine("x", "cp-1")
				other.Labels[clusterv1.MachineControlPlaneNameLabel] = "other-cp"
				return []clusterv1.Machine{a, machine("m2", "cp-2"), other}
			}(),
			info: []string{preflight.ReasonHostnamesUnique},
		},
		{
			name:     "machine without hostname yet",
			kcp:      kcp("v1.37.2", 3, intp(0), wiredArgs...),
			machines: []clusterv1.Machine{machine("m1", "cp-1"), machine("m2", "")},
			warnings: []string{preflight.ReasonHostnameUnknown},
		},
		{
			name:     "maxSurge 0 with one replica",
			kcp:      kcp("v1.37.2", 1, intp(0), wiredArgs...),
			blockers: []string{preflight.ReasonMaxSurgeZeroTooFewReplicas},
			message:  []string{"at least 3 replicas", "has 1"},
		},
		{
			name:     "maxSurge 2",
			kcp:      kcp("v1.37.2", 3, intp(2), wiredArgs...),
			blockers: []string{preflight.ReasonMaxSurgeUnsupported},
		},
		{
			name:     "maxSurge 1 with capacity",
			kcp:      kcp("v1.37.2", 3, intp(1), wiredArgs...),
			capacity: &fakeCapacity{answer: preflight.SurgeCapacity{Available: true, Message: "cx32 in fsn1"}},
			info:     []string{preflight.ReasonMaxSurgeOne, preflight.ReasonSurgeCapacityAvailable},
		},
		{
			name:     "maxSurge unset defaults to 1, no capacity",
			kcp:      kcp("v1.37.2", 3, nil, wiredArgs...),
			capacity: &fakeCapacity{answer: preflight.SurgeCapacity{Available: false, Message: "server type cx32 is out of stock in fsn1"}},
			blockers: []string{preflight.ReasonInsufficientCapacity},
			message:  []string{"out of stock", "set maxSurge to 0"},
		},
		{
			name:     "MVP wired with a shutdown delay: the stopping server would proxy with a closed store",
			kcp:      kcp("v1.37.2", 3, intp(0), with(wiredArgs, "shutdown-delay-duration=5s")...),
			warnings: []string{preflight.ReasonShutdownDelayBreaksPeerProxy},
			message:  []string{"is 5s with MVP wired", "Error getting ip and port info", "set it to 0s"},
		},
		{
			name:     "not wired, a shutdown delay is no MVP matter",
			kcp:      kcp("v1.37.2", 3, intp(0), with(without(wiredArgs, "peer-ca-file"), "shutdown-delay-duration=5s")...),
			blockers: []string{preflight.ReasonPeerCAFileMissing},
			info:     []string{preflight.ReasonGracefulShutdown},
			wire:     true,
		},
		{
			name:     "no Retry-After on shutdown",
			kcp:      kcp("v1.37.2", 3, intp(0), without(wiredArgs, "shutdown-send-retry-after")...),
			warnings: []string{preflight.ReasonShutdownRetryAfterUnset},
			message:  []string{"429 with Retry-After"},
		},
		{
			name:     "capacity unreadable",
			kcp:      kcp("v1.37.2", 3, intp(1), wiredArgs...),
			capacity: &fakeCapacity{err: errors.New("hcloud: unauthorized")},
			warnings: []string{preflight.ReasonSurgeCapacityUnknown},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := tt.machines
			if ms == nil {
				ms = machines(3)
			}
			var c preflight.Capacity
			if tt.capacity != nil {
				c = tt.capacity
			}
			fs := run(tt.kcp, ms, c)
			if got := reasons(fs, preflight.Blocker); !reflect.DeepEqual(got, tt.blockers) {
				t.Errorf("blockers = %v, want %v\n%s", got, tt.blockers, dump(fs))
			}
			if got := reasons(fs, preflight.Warning); !reflect.DeepEqual(got, tt.warnings) {
				t.Errorf("warnings = %v, want %v\n%s", got, tt.warnings, dump(fs))
			}
			for _, r := range tt.info {
				if f, ok := find(fs, r); !ok || f.Severity != preflight.Info {
					t.Errorf("no Info %s", r)
				}
			}
			first := tt.blockers
			if len(first) == 0 {
				first = tt.warnings
			}
			if len(tt.message) > 0 {
				r := tt.msgReason
				if r == "" {
					r = first[0]
				}
				f, _ := find(fs, r)
				for _, m := range tt.message {
					if !strings.Contains(f.Message, m) {
						t.Errorf("message %q lacks %q", f.Message, m)
					}
				}
			}
			if len(tt.blockers) > 0 && preflight.OnlyWireMVPBlockers(fs) != tt.wire {
				t.Errorf("OnlyWireMVPBlockers = %t, want %t", !tt.wire, tt.wire)
			}
			for _, f := range fs {
				if f.Check == "" || f.Reason == "" || f.Message == "" {
					t.Errorf("incomplete finding %+v", f)
				}
			}
		})
	}
}

func TestCapacityAskedOnlyWhenSurging(t *testing.T) {
	c := &fakeCapacity{answer: preflight.SurgeCapacity{Available: true}}
	run(kcp("v1.37.2", 3, intp(0), wiredArgs...), machines(3), c)
	if c.calls != 0 {
		t.Errorf("capacity asked %d times with maxSurge 0", c.calls)
	}
	run(kcp("v1.37.2", 3, intp(1), wiredArgs...), machines(3), c)
	if c.calls != 1 {
		t.Errorf("capacity asked %d times with maxSurge 1", c.calls)
	}
}

func TestRunWithoutControlPlane(t *testing.T) {
	fs := preflight.Run(context.Background(), preflight.Input{}, nil)
	if got := reasons(fs, preflight.Blocker); !reflect.DeepEqual(got, []string{preflight.ReasonNoControlPlane}) {
		t.Errorf("blockers = %v", got)
	}
	fs = run(kcp("latest", 3, intp(0)), nil, nil)
	if got := reasons(fs, preflight.Blocker); !reflect.DeepEqual(got, []string{preflight.ReasonUnknownVersion}) {
		t.Errorf("blockers = %v", got)
	}
}

func TestWireMVPPatch(t *testing.T) {
	render := func(args []preflight.ExtraArg) []string {
		var out []string
		for _, a := range args {
			out = append(out, a.Name+"="+*a.Value)
		}
		return out
	}
	tests := []struct {
		name    string
		kcp     *controlplanev1.KubeadmControlPlane
		version string
		want    []string
		// noHandoff patches a cluster without the load-balancer hand-off.
		noHandoff bool
	}{
		{
			name:      "without the hand-off: a 5s delay",
			kcp:       kcp("v1.37.2", 3, intp(0)),
			version:   "v1.37.2",
			want:      with(wiredArgs, "shutdown-delay-duration=5s"),
			noHandoff: true,
		},
		{
			name:      "without the hand-off: the operator's delay is kept",
			kcp:       kcp("v1.37.2", 3, intp(0), "shutdown-delay-duration=12s"),
			version:   "v1.37.2",
			want:      append([]string{"shutdown-delay-duration=12s"}, without(wiredArgs, "shutdown-delay-duration")...),
			noHandoff: true,
		},
		{
			name:    "bare 1.36: flags only, no gate",
			kcp:     kcp("v1.36.3", 3, intp(0)),
			version: "v1.36.3",
			want:    wiredArgs,
		},
		{
			name:    "bare 1.35: the gate too",
			kcp:     kcp("v1.35.4", 3, intp(0)),
			version: "v1.35.4",
			want:    append([]string{"feature-gates=UnknownVersionInteroperabilityProxy=true"}, wiredArgs...),
		},
		{
			name: "existing args kept in order, gates merged, lists extended, explicit paths kept",
			kcp: kcp("v1.35.4", 3, intp(0),
				"audit-log-path=/var/log/audit.log",
				"feature-gates=SomeGate=true,UnknownVersionInteroperabilityProxy=false",
				"requestheader-allowed-names=aggregator",
				"requestheader-username-headers=X-Remote-User",
				"proxy-client-cert-file=/etc/custom/proxy.crt"),
			version: "v1.35.4",
			want: []string{
				"audit-log-path=/var/log/audit.log",
				"feature-gates=SomeGate=true,UnknownVersionInteroperabilityProxy=true",
				"requestheader-allowed-names=aggregator,front-proxy-client",
				"requestheader-username-headers=X-Remote-User",
				"proxy-client-cert-file=/etc/custom/proxy.crt",
				"peer-ca-file=/etc/kubernetes/pki/ca.crt",
				"proxy-client-key-file=/etc/kubernetes/pki/front-proxy-client.key",
				"requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt",
				"requestheader-group-headers=X-Remote-Group",
				"requestheader-extra-headers-prefix=X-Remote-Extra-",
				"shutdown-delay-duration=0s",
				"shutdown-send-retry-after=true",
			},
		},
		{
			name:    "a shutdown delay is set to 0s",
			kcp:     kcp("v1.37.2", 3, intp(0), "shutdown-delay-duration=5s", "shutdown-send-retry-after=false"),
			version: "v1.37.2",
			// Flags the KCP has keep their place; an explicit Retry-After
			// is the operator's (preflight warns about it).
			want: append([]string{"shutdown-delay-duration=0s", "shutdown-send-retry-after=false"},
				without(without(wiredArgs, "shutdown-delay-duration"), "shutdown-send-retry-after")...),
		},
		{
			name:    "1.37 with the gate explicitly off: turned on",
			kcp:     kcp("v1.37.2", 3, intp(0), "feature-gates=UnknownVersionInteroperabilityProxy=false"),
			version: "v1.37.2",
			want:    append([]string{"feature-gates=UnknownVersionInteroperabilityProxy=true"}, wiredArgs...),
		},
		{
			name: "custom certificatesDir",
			kcp: func() *controlplanev1.KubeadmControlPlane {
				k := kcp("v1.37.2", 3, intp(0))
				k.Spec.KubeadmConfigSpec.ClusterConfiguration.CertificatesDir = "/srv/pki"
				return k
			}(),
			version: "v1.37.2",
			want: func() []string {
				var out []string
				for _, a := range wiredArgs {
					out = append(out, strings.ReplaceAll(a, "/etc/kubernetes/pki", "/srv/pki"))
				}
				return out
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := preflight.WireMVPPatch(tt.kcp, tt.version, !tt.noHandoff)
			if !reflect.DeepEqual(render(got), tt.want) {
				t.Errorf("WireMVPPatch:\n got %v\nwant %v", render(got), tt.want)
			}
			// Applying the patch wires MVP, and patching again changes nothing.
			patched := tt.kcp.DeepCopy()
			patched.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs = got
			if wired, fs := preflight.MVPWired(patched); !wired {
				t.Errorf("not wired after the patch: %+v", preflight.Blockers(fs))
			}
			if again := preflight.WireMVPPatch(patched, tt.version, !tt.noHandoff); !reflect.DeepEqual(render(again), render(got)) {
				t.Errorf("patch not idempotent:\n%v\n%v", render(again), render(got))
			}
			// The input is not modified.
			before := tt.kcp.DeepCopy()
			preflight.WireMVPPatch(tt.kcp, tt.version, !tt.noHandoff)
			if !reflect.DeepEqual(before, tt.kcp) {
				t.Errorf("WireMVPPatch modified its input")
			}
		})
	}
}

func withVersions(k *controlplanev1.KubeadmControlPlane, versions ...string) *controlplanev1.KubeadmControlPlane {
	for _, v := range versions {
		k.Status.Versions = append(k.Status.Versions, clusterv1.StatusVersion{Version: v})
	}
	return k
}

func dump(fs []preflight.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  %s %s %s: %s [%s]\n", f.Severity, f.Check, f.Reason, f.Message, f.Evidence)
	}
	return b.String()
}
