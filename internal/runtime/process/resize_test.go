package process_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/process"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/sandbox/sandboxtest"
	"bex.co/bex/test/platformtest"
)

// TestResourcesChangeRollsInstancesInSandbox deploys a release whose
// instances run in the sandbox, each held by its cgroup to the release's
// resources, then the same release with other resources (a change of
// plan): every instance is replaced by one held to the new resources,
// with every request through the edge answered; the same release and
// resources again replace nothing.
func TestResourcesChangeRollsInstancesInSandbox(t *testing.T) {
	sandboxtest.Require(t)
	d := newDriver(t, process.Options{Sandbox: sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})})
	srv := httptest.NewServer(newEdge(t, d))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const app = "resized"
	sized := func(r runtime.Resources) runtime.Release {
		rel := webRelease(t, app, 1, 2, "v1", nil)
		rel.Resources = r
		return rel
	}
	// held checks that two instances run, none of before, each held to
	// want, and returns their pids.
	held := func(what string, want sandboxtest.CgroupLimits, before []int) []int {
		t.Helper()
		pids := d.PIDs(tenant, app)
		if len(pids) != 2 {
			t.Fatalf("%s: %d instances run (%v), want 2", what, len(pids), pids)
		}
		for _, pid := range pids {
			if slices.Contains(before, pid) {
				t.Errorf("%s: instance %d of %v still runs", what, pid, before)
			}
			got, err := sandboxtest.ContainerLimits(pid)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got != want {
				t.Errorf("%s: instance %d is held to %+v, want %+v", what, pid, got, want)
			}
		}
		return pids
	}

	if err := d.Deploy(ctx, sized(runtime.Resources{CPU: "250m", Memory: "512Mi"}), nil); err != nil {
		t.Fatal(err)
	}
	small := held("250m and 512Mi", sandboxtest.CgroupLimits{MemoryBytes: 512 << 20, CPU: "25000 100000", Pids: "256"}, nil)

	stop := make(chan struct{})
	h := startHammer(t, srv.URL+"/", edge.Hostname(tenant, app, domain), stop)
	platformtest.Eventually(t, 20*time.Second, "v1 answers through the edge", func(context.Context) error {
		if h.count("v1") == 0 {
			return errors.New("no answer yet")
		}
		return nil
	})
	if err := d.Deploy(ctx, sized(runtime.Resources{CPU: "1", Memory: "2Gi"}), nil); err != nil {
		t.Fatal(err)
	}
	answered := h.count("v1")
	platformtest.Eventually(t, 20*time.Second, "answers after the change", func(context.Context) error {
		if h.count("v1") <= answered {
			return errors.New("no answer since the change")
		}
		return nil
	})
	close(stop)
	<-h.done
	if len(h.failures) > 0 {
		t.Errorf("%d of %d requests failed while the resources changed; first: %s", len(h.failures), len(h.failures)+len(h.bodies), h.failures[0])
	}
	big := held("1 CPU and 2Gi", sandboxtest.CgroupLimits{MemoryBytes: 2 << 30, CPU: "100000 100000", Pids: "256"}, small)

	if err := d.Deploy(ctx, sized(runtime.Resources{CPU: "1", Memory: "2Gi"}), nil); err != nil {
		t.Fatal(err)
	}
	if now := d.PIDs(tenant, app); !slices.Equal(now, big) {
		t.Errorf("the same release and resources again replaced instances: %v, was %v", now, big)
	}
}
