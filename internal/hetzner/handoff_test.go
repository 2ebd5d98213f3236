package hetzner_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"bex.co/bex/internal/hetzner"
	"bex.co/bex/internal/hetzner/hcloudfake"
)

// world is a fake project with a three-server control plane behind its API
// load balancer, and a fourth server not yet in it.
type world struct {
	fake           *hcloudfake.Fake
	client         *hcloud.Client
	lb             int64
	a, b, c, fresh int64
}

func newWorld(t *testing.T) *world {
	t.Helper()
	f := hcloudfake.New(hcloudfake.Options{})
	t.Cleanup(f.Close)
	f.AddLocation("fsn1", "eu-central")
	f.AddServerType(hcloudfake.ServerTypeSpec{Name: "cx32", Cores: 4, Memory: 8, Disk: 80,
		Locations: map[string]bool{"fsn1": true}, PriceHourly: "0.0112", PriceMonthly: "6.80"})
	labels := map[string]string{"caph-cluster-c1": "owned", "machine_type": "control_plane"}
	w := &world{fake: f, client: f.Client()}
	w.a = f.AddServer(hcloudfake.ServerSpec{Name: "c1-cp-a", Labels: labels, ServerType: "cx32", Location: "fsn1", IPv4: "192.0.2.1"})
	w.b = f.AddServer(hcloudfake.ServerSpec{Name: "c1-cp-b", Labels: labels, ServerType: "cx32", Location: "fsn1", IPv4: "192.0.2.2"})
	w.c = f.AddServer(hcloudfake.ServerSpec{Name: "c1-cp-c", Labels: labels, ServerType: "cx32", Location: "fsn1", IPv4: "192.0.2.3"})
	w.fresh = f.AddServer(hcloudfake.ServerSpec{Name: "c1-cp-d", Labels: labels, ServerType: "cx32", Location: "fsn1", IPv4: "192.0.2.4"})
	w.lb = f.AddLoadBalancer(hcloudfake.LoadBalancerSpec{Name: "c1-kube-api", Location: "fsn1", ListenPorts: []int{6443}, Targets: []int64{w.a, w.b, w.c}})
	return w
}

// waits records every wait the hand-off asks for and returns at once; hook
// (if set) runs on each, with the call's index.
type waits struct {
	mu    sync.Mutex
	calls []time.Duration
	hook  func(i int, d time.Duration)
}

func (w *waits) wait(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.calls = append(w.calls, d)
	i := len(w.calls) - 1
	hook := w.hook
	w.mu.Unlock()
	if hook != nil {
		hook(i, d)
	}
	return ctx.Err()
}

func (w *waits) count(d time.Duration) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.calls {
		if c == d {
			n++
		}
	}
	return n
}

const (
	drain = 7 * time.Second
	poll  = 3 * time.Second
)

func (w *world) handoff(t *testing.T, ws *waits, lb string) *hetzner.LoadBalancerHandoff {
	t.Helper()
	h, err := hetzner.NewLoadBalancerHandoff(w.client, hetzner.HandoffOptions{
		LoadBalancer: lb, DrainPeriod: drain, PollInterval: poll, Wait: ws.wait})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func seqOf(events []hcloudfake.Event, kind hcloudfake.EventKind, server int64) (hcloudfake.Event, bool) {
	for _, e := range events {
		if e.Kind == kind && e.ServerID == server {
			return e, true
		}
	}
	return hcloudfake.Event{}, false
}

// The old server leaves the load balancer, and drains, before its machine
// (and so its server) is deleted.
func TestRemoveServerBeforeDelete(t *testing.T) {
	w := newWorld(t)
	ws := &waits{}
	var targetsAtDrain []int64
	ws.hook = func(_ int, d time.Duration) {
		if d == drain {
			targetsAtDrain = w.fake.Targets(w.lb)
		}
	}
	h := w.handoff(t, ws, "c1-kube-api")
	ctx := context.Background()

	res, err := h.RemoveServer(ctx, hetzner.ServerRef{Name: "c1-cp-a", LabelSelector: "caph-cluster-c1=owned"})
	if err != nil {
		t.Fatalf("RemoveServer: %v", err)
	}
	if !res.Changed || !res.ServerFound || res.ServerID != w.a || res.Drained != drain {
		t.Errorf("result = %+v", res)
	}
	if got := w.fake.Targets(w.lb); !equal(got, []int64{w.b, w.c}) {
		t.Errorf("targets after removal = %v, want %v", got, []int64{w.b, w.c})
	}
	if !equal(targetsAtDrain, []int64{w.b, w.c}) {
		t.Errorf("targets while draining = %v: the drain must start after the target left", targetsAtDrain)
	}

	// Cluster API deletes the machine; CAPH deletes its server.
	if _, _, err := w.client.Server.DeleteWithResult(ctx, &hcloud.Server{ID: w.a}); err != nil {
		t.Fatalf("deleting server: %v", err)
	}
	events := w.fake.Events()
	removed, ok1 := seqOf(events, hcloudfake.EventTargetRemoved, w.a)
	deleted, ok2 := seqOf(events, hcloudfake.EventServerDeleted, w.a)
	if !ok1 || !ok2 {
		t.Fatalf("events %+v: want TargetRemoved and ServerDeleted for server %d", events, w.a)
	}
	if removed.Seq >= deleted.Seq || removed.At.After(deleted.At) {
		t.Errorf("target removed at #%d (%s), server deleted at #%d (%s): the server must leave first", removed.Seq, removed.At, deleted.Seq, deleted.At)
	}
	if deleted.Detail != "not a load balancer target" {
		t.Errorf("server deleted while %s", deleted.Detail)
	}
}

// Without the hand-off the fake sees the server deleted while still a
// target: the check above would catch a hand-off that does nothing.
func TestDeleteWithoutHandoffIsSeen(t *testing.T) {
	w := newWorld(t)
	if _, _, err := w.client.Server.DeleteWithResult(context.Background(), &hcloud.Server{ID: w.b}); err != nil {
		t.Fatal(err)
	}
	deleted, ok := seqOf(w.fake.Events(), hcloudfake.EventServerDeleted, w.b)
	if !ok || deleted.Detail != "still a target of load balancers "+strconv.FormatInt(w.lb, 10) {
		t.Errorf("deleted event = %+v", deleted)
	}
}

func TestAddServerWaitsUntilHealthy(t *testing.T) {
	w := newWorld(t)
	w.fake.ScriptHealth(w.fresh, hcloudfake.HealthUnhealthy, hcloudfake.HealthUnhealthy, hcloudfake.HealthHealthy)
	ws := &waits{}
	h := w.handoff(t, ws, strconv.FormatInt(w.lb, 10))

	res, err := h.AddServer(context.Background(), hetzner.ServerRef{Name: "c1-cp-d"})
	if err != nil {
		t.Fatalf("AddServer: %v", err)
	}
	if !res.Changed || res.ServerID != w.fresh {
		t.Errorf("result = %+v", res)
	}
	if got := w.fake.Targets(w.lb); !equal(got, []int64{w.a, w.b, w.c, w.fresh}) {
		t.Errorf("targets = %v", got)
	}
	// unknown, unhealthy, unhealthy, then healthy: three polls.
	if n := ws.count(poll); n != 3 {
		t.Errorf("health polls = %d, want 3", n)
	}
	hs, err := h.TargetHealth(context.Background(), hetzner.ServerRef{Name: "c1-cp-d"})
	if err != nil || len(hs) != 1 || hs[0].ListenPort != 6443 || hs[0].Status != hcloud.LoadBalancerTargetHealthStatusStatusHealthy {
		t.Errorf("TargetHealth = %+v, %v", hs, err)
	}
	if ws.count(drain) != 0 {
		t.Errorf("adding must not drain")
	}
}

func TestAddServerGivesUpWithLastHealth(t *testing.T) {
	w := newWorld(t)
	w.fake.ScriptHealth(w.fresh, hcloudfake.HealthUnhealthy)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws := &waits{hook: func(i int, _ time.Duration) {
		if i == 3 {
			cancel()
		}
	}}
	h := w.handoff(t, ws, "c1-kube-api")
	_, err := h.AddServer(ctx, hetzner.ServerRef{Name: "c1-cp-d"})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "port 6443 unhealthy layer4_no_connection") {
		t.Fatalf("err = %v, want canceled with the last health", err)
	}
}

func TestHandoffIdempotent(t *testing.T) {
	w := newWorld(t)
	ws := &waits{}
	h := w.handoff(t, ws, "c1-kube-api")
	ctx := context.Background()

	if _, err := h.RemoveServer(ctx, hetzner.ServerRef{Name: "c1-cp-a"}); err != nil {
		t.Fatal(err)
	}
	res, err := h.RemoveServer(ctx, hetzner.ServerRef{Name: "c1-cp-a"})
	if err != nil || res.Changed || !res.ServerFound || res.Drained != 0 {
		t.Errorf("second RemoveServer = %+v, %v; want unchanged, no drain", res, err)
	}

	// The target disappears between our read and our call (another client
	// removed it): the API answers load_balancer_target_not_found.
	w.fake.FailNext(http.MethodPost, "/load_balancers/"+strconv.FormatInt(w.lb, 10)+"/actions/remove_target",
		http.StatusNotFound, "load_balancer_target_not_found", "load balancer target not found")
	res, err = h.RemoveServer(ctx, hetzner.ServerRef{Name: "c1-cp-b"})
	if err != nil || res.Changed {
		t.Errorf("RemoveServer racing another client = %+v, %v", res, err)
	}

	// A server already deleted has nothing to remove.
	if _, _, err := w.client.Server.DeleteWithResult(ctx, &hcloud.Server{ID: w.c}); err != nil {
		t.Fatal(err)
	}
	res, err = h.RemoveServer(ctx, hetzner.ServerRef{Name: "c1-cp-c"})
	if err != nil || res.ServerFound || res.Changed {
		t.Errorf("RemoveServer of a deleted server = %+v, %v", res, err)
	}

	// Adding a server that is a target already waits for health only.
	res, err = h.AddServer(ctx, hetzner.ServerRef{Name: "c1-cp-b"})
	if err != nil || res.Changed {
		t.Errorf("AddServer of a target = %+v, %v", res, err)
	}
	// The API says target_already_defined when another client won the race.
	w.fake.FailNext(http.MethodPost, "/load_balancers/"+strconv.FormatInt(w.lb, 10)+"/actions/add_target",
		http.StatusUnprocessableEntity, string(hcloud.ErrorCodeTargetAlreadyDefined), "already defined")
	w.fake.ScriptHealth(w.fresh) // unscripted: healthy on the second read
	if _, err := h.AddServer(ctx, hetzner.ServerRef{Name: "c1-cp-d"}); err == nil {
		t.Errorf("AddServer after target_already_defined for a target that is not there: want the health wait to fail")
	}
	res, err = h.AddServer(ctx, hetzner.ServerRef{Name: "c1-cp-d"})
	if err != nil || !res.Changed {
		t.Errorf("AddServer = %+v, %v", res, err)
	}
}

func TestHandoffErrorsCarryTheAPICode(t *testing.T) {
	ctx := context.Background()
	t.Run("forbidden remove_target", func(t *testing.T) {
		w := newWorld(t)
		w.fake.FailNext(http.MethodPost, "/load_balancers/"+strconv.FormatInt(w.lb, 10)+"/actions/remove_target",
			http.StatusForbidden, string(hcloud.ErrorCodeForbidden), "insufficient permissions for this request")
		_, err := w.handoff(t, &waits{}, "c1-kube-api").RemoveServer(ctx, hetzner.ServerRef{Name: "c1-cp-a"})
		if !hcloud.IsError(err, hcloud.ErrorCodeForbidden) || !strings.Contains(err.Error(), "removing server c1-cp-a") {
			t.Fatalf("err = %v", err)
		}
		if got := w.fake.Targets(w.lb); len(got) != 3 {
			t.Errorf("targets = %v, want unchanged", got)
		}
	})
	t.Run("action fails", func(t *testing.T) {
		w := newWorld(t)
		w.fake.FailNextAction("action_failed", "target could not be removed")
		ws := &waits{}
		_, err := w.handoff(t, ws, "c1-kube-api").RemoveServer(ctx, hetzner.ServerRef{Name: "c1-cp-a"})
		var ae hcloud.ActionError
		if !errors.As(err, &ae) || ae.Code != "action_failed" || !strings.Contains(err.Error(), "waiting for action") {
			t.Fatalf("err = %v, want the action's error", err)
		}
		if ws.count(drain) != 0 {
			t.Errorf("a failed removal must not drain")
		}
	})
	t.Run("load balancer not found", func(t *testing.T) {
		w := newWorld(t)
		_, err := w.handoff(t, &waits{}, "nope").RemoveServer(ctx, hetzner.ServerRef{Name: "c1-cp-a"})
		if !errors.Is(err, hetzner.ErrLoadBalancerNotFound) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("ambiguous server", func(t *testing.T) {
		w := newWorld(t)
		_, err := w.handoff(t, &waits{}, "c1-kube-api").RemoveServer(ctx, hetzner.ServerRef{LabelSelector: "caph-cluster-c1=owned"})
		if !errors.Is(err, hetzner.ErrServerAmbiguous) || !strings.Contains(err.Error(), "c1-cp-a, c1-cp-b") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("add unknown server", func(t *testing.T) {
		w := newWorld(t)
		_, err := w.handoff(t, &waits{}, "c1-kube-api").AddServer(ctx, hetzner.ServerRef{Name: "c1-cp-x"})
		if !errors.Is(err, hetzner.ErrServerNotFound) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestHandoffRetriesRateLimit(t *testing.T) {
	w := newWorld(t)
	w.fake.RateLimit(4)
	res, err := w.handoff(t, &waits{}, "c1-kube-api").RemoveServer(context.Background(), hetzner.ServerRef{Name: "c1-cp-a"})
	if err != nil || !res.Changed {
		t.Fatalf("RemoveServer under a rate limit = %+v, %v", res, err)
	}
	if got := w.fake.Targets(w.lb); !equal(got, []int64{w.b, w.c}) {
		t.Errorf("targets = %v", got)
	}
	// The four 429s were retried: the first request was sent five times.
	reqs := w.fake.Requests()
	if len(reqs) < 5 || reqs[0] != reqs[4] {
		t.Errorf("requests = %v", reqs)
	}

	// Beyond hcloud-go's retries the error says so.
	w.fake.RateLimit(100)
	_, err = w.handoff(t, &waits{}, "c1-kube-api").RemoveServer(context.Background(), hetzner.ServerRef{Name: "c1-cp-b"})
	if !hcloud.IsError(err, hcloud.ErrorCodeRateLimitExceeded) {
		t.Fatalf("err = %v, want rate_limit_exceeded", err)
	}
}

func TestHandoffWaitsForLockedLoadBalancer(t *testing.T) {
	w := newWorld(t)
	// Another client's action holds the load balancer for the next 6
	// requests.
	w.fake.LockLoadBalancer(w.lb, 6)
	ws := &waits{}
	res, err := w.handoff(t, ws, "c1-kube-api").RemoveServer(context.Background(), hetzner.ServerRef{Name: "c1-cp-a"})
	if err != nil || !res.Changed {
		t.Fatalf("RemoveServer = %+v, %v", res, err)
	}
	if ws.count(poll) == 0 {
		t.Errorf("expected retries of the locked load balancer; waits = %v", ws.calls)
	}
	locked := 0
	for _, r := range w.fake.Requests() {
		if strings.HasSuffix(r, "/remove_target") {
			locked++
		}
	}
	if locked < 2 {
		t.Errorf("remove_target sent %d times, want retries after locked", locked)
	}
}

func TestSurgeCapacity(t *testing.T) {
	f := hcloudfake.New(hcloudfake.Options{})
	defer f.Close()
	f.AddLocation("fsn1", "eu-central")
	f.AddLocation("nbg1", "eu-central")
	f.AddLocation("ash", "us-east")
	f.AddServerType(hcloudfake.ServerTypeSpec{Name: "cx32", Locations: map[string]bool{"fsn1": true, "nbg1": false}, PriceHourly: "0.0112", PriceMonthly: "6.80"})
	f.AddServerType(hcloudfake.ServerTypeSpec{Name: "cx11", Locations: map[string]bool{"fsn1": true}, Deprecated: true})
	acct, err := hetzner.NewAccount(f.Client())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		st, loc    string
		available  bool
		deprecated bool
		msg        string
	}{
		{"cx32", "fsn1", true, false, "server type cx32 is available in fsn1, 0.0112 net per hour"},
		{"cx32", "nbg1", false, false, "server type cx32 is out of stock in nbg1"},
		{"cx32", "ash", false, false, "server type cx32 is not offered in ash"},
		{"cx32", "hel9", false, false, "location hel9 does not exist"},
		{"cx99", "fsn1", false, false, "server type cx99 does not exist"},
		{"cx11", "fsn1", true, true, "(deprecated: unavailable after"},
	}
	for _, tt := range tests {
		t.Run(tt.st+"/"+tt.loc, func(t *testing.T) {
			s, err := acct.SurgeCapacity(context.Background(), tt.st, tt.loc)
			if err != nil {
				t.Fatal(err)
			}
			if s.Available != tt.available || s.Deprecated != tt.deprecated || !strings.Contains(s.Message, tt.msg) {
				t.Errorf("SurgeCapacity = %+v, want available=%t deprecated=%t message containing %q", s, tt.available, tt.deprecated, tt.msg)
			}
		})
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
