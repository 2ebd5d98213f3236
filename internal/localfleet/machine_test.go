package localfleet

import (
	"io"
	"net/netip"
	"slices"
	"testing"

	"bex.co/bex/internal/tcplb"
)

// A machine whose start fails after its kube-apiserver joined the load
// balancer (registering its Node failed, say) leaves the rotation: the
// next start's kube-apiserver, at the same address, would otherwise get
// the clients' new connections as soon as it listens, before it is ready
// (a 403 from its authorizer that has synced no role, in the real-KCP
// scenario of test/upgrade). The other machines stay.
func TestFailedStartLeavesTheLoadBalancer(t *testing.T) {
	block := netip.MustParsePrefix("127.77.3.0/24")
	c := &Cluster{spec: ClusterSpec{Namespace: "default", Name: "local-1", Block: block}, dir: t.TempDir(),
		host: &Host{opts: Options{Log: io.Discard}}, machines: map[string]*Machine{}}
	failed := &Machine{c: c, spec: MachineSpec{Name: "local-1-cp-b", Version: "1.37.2"}, ip: blockAddr(block, 12),
		supervised: newSupervised()}
	other := (&Machine{c: c, ip: blockAddr(block, 11)}).Addr()
	lb, err := tcplb.Listen("127.0.0.1:0", tcplb.Options{}, other, failed.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	c.lb = lb

	failed.abortStart()
	if got := lb.Backends(); !slices.Equal(got, []string{other}) {
		t.Fatalf("rotation after a failed start = %v, want only %s", got, other)
	}
}
