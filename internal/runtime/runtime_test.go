package runtime_test

import (
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/runtime"
)

func TestHealthCheckDefaults(t *testing.T) {
	h := runtime.HealthCheck{}.WithDefaults()
	if h.Timeout != 5*time.Second || h.Interval != 10*time.Second || h.SuccessThreshold != 1 || h.FailureThreshold != 3 {
		t.Errorf("defaults %+v", h)
	}
	if got := h.String(); got != "TCP connect" {
		t.Errorf("String without a path: %q", got)
	}
	h = runtime.HealthCheck{Path: "/up", Timeout: time.Second, FailureThreshold: 5}.WithDefaults()
	if h.Timeout != time.Second || h.FailureThreshold != 5 || h.String() != "GET /up" {
		t.Errorf("set fields changed: %+v", h)
	}
}

func TestValidate(t *testing.T) {
	valid := func() runtime.Release {
		return runtime.Release{
			Tenant: "my-team", App: "my-app", Number: 1,
			Env:       map[string]string{"DATABASE_URL": "x", "_X": ""},
			Processes: map[string]runtime.Process{"web": {Replicas: 2}, "worker-2": {Replicas: 0}},
		}
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid release refused: %v", err)
	}
	for name, tc := range map[string]struct {
		mutate func(*runtime.Release)
		want   string
	}{
		"tenant":       {func(r *runtime.Release) { r.Tenant = "My_Team" }, "invalid tenant"},
		"long app":     {func(r *runtime.Release) { r.App = strings.Repeat("a", 41) }, "at most 40"},
		"number":       {func(r *runtime.Release) { r.Number = 0 }, "release number"},
		"no processes": {func(r *runtime.Release) { r.Processes = nil }, "no processes"},
		"process name": {func(r *runtime.Release) { r.Processes["2web"] = runtime.Process{} }, `process name "2web"`},
		"replicas":     {func(r *runtime.Release) { r.Processes["web"] = runtime.Process{Replicas: -1} }, "negative"},
		"env":          {func(r *runtime.Release) { r.Env["A-B"] = "" }, `variable name "A-B"`},
		"path":         {func(r *runtime.Release) { r.HealthCheck.Path = "up" }, "must start with '/'"},
		"port":         {func(r *runtime.Release) { r.HealthCheck.Port = 70000 }, "health check port"},
	} {
		r := valid()
		tc.mutate(&r)
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}
