package controlplane_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/mvp"
	"bex.co/bex/test/platformtest"
)

// newIn137 are resources 1.37.2 serves and 1.36.3 does not (the skew set the
// mixed-version suite computes from the binaries' nopeer discovery).
var newIn137 = []schema.GroupVersionResource{
	{Group: "storagemigration.k8s.io", Version: "v1", Resource: "storageversionmigrations"},
	{Group: "certificates.k8s.io", Version: "v1", Resource: "clustertrustbundles"},
}

// TestPeerSyncGate starts a 1.37.2 apiserver next to a 1.36.3 one, both with
// MVP wired, behind the plane's load balancer, while clients list the
// 1.37-only resources through the load balancer on fresh connections (so
// that each request is balanced anew). From the moment the new server is in
// the rotation, no request gets a 404: the old server, which does not serve
// those resources, already proxies them, because StartAPIServer added the
// new server only once the old one's merged discovery listed them.
//
// Then it loses the new server twice, once by KillAPIServer and once by a
// SIGKILL the plane did not send (a crash): each time the plane removes the
// dead server's identity lease through the survivor, which then answers 404
// for those resources (nobody serves them) instead of proxying them into the
// dead peer (503).
func TestPeerSyncGate(t *testing.T) {
	cp := cptest.StartWith(t, controlplane.Options{
		LoadBalancer: true,
		APIServers:   []controlplane.APIServerSpec{{Name: "old", Version: "1.36.3"}},
	})
	old := cp.APIServer("old")

	hammer := startHammer(t, cp)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	started := time.Now()
	s, err := cp.StartAPIServer(ctx, controlplane.APIServerSpec{Name: "new", Version: "1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	joined := time.Now()
	// At the moment it joined, the old server listed what it serves.
	missing, err := mvp.UnlistedByPeers(ctx, mvp.Server{Name: s.Name, Config: s.RESTConfig()}, []mvp.Server{{Name: old.Name, Config: old.RESTConfig()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("new joined the load balancer while the old server's merged discovery lacked %v", missing)
	}
	own, err := mvp.Discovery(ctx, s.RESTConfig(), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, gvr := range newIn137 {
		if _, ok := own[gvr]; !ok {
			t.Fatalf("1.37.2 does not serve %s: pick another probe", mvp.GVRString(gvr))
		}
	}
	time.Sleep(3 * time.Second) // the load after the join is what the test is about
	reqs := hammer.stop()
	after, byStatus, notFound := 0, map[int]int{}, []string{}
	for _, r := range reqs {
		if !r.inRotation {
			continue
		}
		after++
		byStatus[r.status]++
		if r.status == http.StatusNotFound {
			notFound = append(notFound, fmt.Sprintf("%+.2fs %s", r.at.Sub(joined).Seconds(), mvp.GVRString(r.gvr)))
		}
	}
	t.Logf("new: ready and admitted after %.1fs, of which %.2fs waiting for its peer; %d requests after it joined: %v (%d without an answer)",
		joined.Sub(started).Seconds(), s.PeerSyncWait.Seconds(), after, byStatus, hammer.failed())
	if after < 20 {
		t.Fatalf("only %d requests after the new server joined: the test proves nothing", after)
	}
	if len(notFound) > 0 {
		t.Errorf("%d requests for the 1.37-only resources got 404 after the new server joined: %v", len(notFound), notFound)
	}
	if byStatus[http.StatusOK] == 0 {
		t.Errorf("no request through the load balancer succeeded after the join: %v", byStatus)
	}

	// Lost through KillAPIServer: its lease is gone when it returns.
	waitStatus(t, old.RESTConfig(), newIn137[0], http.StatusOK, 30*time.Second)
	if err := cp.KillAPIServer("new"); err != nil {
		t.Fatal(err)
	}
	if l := identityLeases(t, old.RESTConfig(), "new"); len(l) > 0 {
		t.Errorf("identity lease %v of the killed server is still there", l)
	}
	assertForgotten(t, old.RESTConfig(), "new")

	// Lost by a crash: the plane notices the exit.
	s2, err := cp.StartAPIServer(ctx, controlplane.APIServerSpec{Name: "new-2", Version: "1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, old.RESTConfig(), newIn137[0], http.StatusOK, 30*time.Second)
	if len(identityLeases(t, old.RESTConfig(), "new-2")) == 0 {
		t.Fatal("new-2 has no identity lease")
	}
	if err := syscall.Kill(s2.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 10*time.Second, "the crashed server's identity lease to go", func(context.Context) error {
		if l := identityLeases(t, old.RESTConfig(), "new-2"); len(l) > 0 {
			return fmt.Errorf("still there: %v", l)
		}
		return nil
	})
	if slices.Contains(cp.LoadBalancer().Backends(), s2.Addr()) {
		t.Error("the crashed server is still in the load balancer")
	}
	assertForgotten(t, old.RESTConfig(), "new-2")
}

// assertForgotten asserts that the survivor answers 404 for the lost
// server's resources within a few seconds, and goes on doing so: it no
// longer proxies them into the dead peer.
func assertForgotten(t *testing.T, survivor *rest.Config, dead string) {
	t.Helper()
	lost := time.Now()
	at := waitStatus(t, survivor, newIn137[0], http.StatusNotFound, 5*time.Second)
	for range 10 {
		for _, gvr := range newIn137 {
			if got := status(t.Context(), t, survivor, mvp.ListPath(gvr)+"?limit=1"); got != http.StatusNotFound {
				t.Errorf("after %s was lost the survivor answered %d for %s, want 404", dead, got, mvp.GVRString(gvr))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the survivor answered 404 for %s's resources %.2fs after it was lost", dead, at.Sub(lost).Seconds())
}

// identityLeases returns the names of the identity leases of hostname.
func identityLeases(t *testing.T, cfg *rest.Config, hostname string) []string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoordinationV1().Leases(metav1.NamespaceSystem).List(t.Context(), metav1.ListOptions{
		LabelSelector: mvp.IdentityLeaseSelector + "," + corev1.LabelHostname + "=" + hostname})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range list.Items {
		out = append(out, l.Name)
	}
	return out
}

// waitStatus polls a list of gvr until it answers want, and returns when.
func waitStatus(t *testing.T, cfg *rest.Config, gvr schema.GroupVersionResource, want int, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	platformtest.Eventually(t, timeout, fmt.Sprintf("list %s to answer %d", mvp.GVRString(gvr), want), func(context.Context) error {
		if got := status(t.Context(), t, cfg, mvp.ListPath(gvr)+"?limit=1"); got != want {
			return fmt.Errorf("status %d", got)
		}
		at = time.Now()
		return nil
	})
	return at
}

func list(ctx context.Context, client *http.Client, host string, gvr schema.GroupVersionResource) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+mvp.ListPath(gvr)+"?limit=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// hammer lists the 1.37-only resources through the plane's load balancer
// from several clients, each request on a fresh connection.
type hammer struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	reqs   []hammerReq
	errs   []error
}

type hammerReq struct {
	at     time.Time
	gvr    schema.GroupVersionResource
	status int
	// inRotation: a server that serves gvr was in the load balancer's
	// rotation when the request started.
	inRotation bool
}

func startHammer(t *testing.T, cp *controlplane.ControlPlane) *hammer {
	cfg := cp.RESTConfig()
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	h := &hammer{cancel: cancel}
	oldAddr := cp.APIServer("old").Addr()
	for i := range 6 {
		h.wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				gvr := newIn137[(i+n)%len(newIn137)]
				// Another backend than the old one is the new server.
				in := slices.ContainsFunc(cp.LoadBalancer().Backends(), func(a string) bool { return a != oldAddr })
				tr := &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}
				at := time.Now()
				code, err := list(ctx, &http.Client{Transport: tr}, cfg.Host, gvr)
				tr.CloseIdleConnections()
				h.mu.Lock()
				if err != nil {
					if ctx.Err() == nil {
						h.errs = append(h.errs, err)
					}
				} else {
					h.reqs = append(h.reqs, hammerReq{at: at, gvr: gvr, status: code, inRotation: in})
				}
				h.mu.Unlock()
			}
		})
	}
	t.Cleanup(func() { h.stop() })
	return h
}

// failed counts the requests that got no answer.
func (h *hammer) failed() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.errs)
}

// stop ends the load and returns the requests it sent.
func (h *hammer) stop() []hammerReq {
	h.cancel()
	h.wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.reqs)
}
