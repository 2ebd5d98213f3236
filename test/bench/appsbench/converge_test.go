package main

import "testing"

func TestResourceOf(t *testing.T) {
	for path, want := range map[string]string{
		"/apis/platform.bex.co/v1alpha1/namespaces/t0001/apps/app00001/status": "apps/status",
		"/apis/platform.bex.co/v1alpha1/namespaces/t0001/apps/app00001":        "apps",
		"/apis/platform.bex.co/v1alpha1/namespaces/t0001/routes":               "routes",
		"/api/v1/namespaces/t0001/events":                                      "events",
		"/api/v1/namespaces/t0001":                                             "namespaces",
		"/apis/coordination.k8s.io/v1/leases":                                  "leases",
		"/healthz":                                                             "/healthz",
	} {
		if got := resourceOf(path); got != want {
			t.Errorf("resourceOf(%s) = %q, want %q", path, got, want)
		}
	}
}
