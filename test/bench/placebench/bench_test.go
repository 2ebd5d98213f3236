package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestRequestKey(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{http.MethodGet, "/apis/scheduling.bex.co/v1alpha1/namespaces/tenant-0001/placements/app-00001", "get placements"},
		{http.MethodGet, "/apis/scheduling.bex.co/v1alpha1/clustercapacities/c001", "get clustercapacities"},
		{http.MethodGet, "/apis/scheduling.bex.co/v1alpha1/clustercapacities?watch=true", "watch clustercapacities"},
		{http.MethodGet, "/apis/scheduling.bex.co/v1alpha1/clustercapacities", "list clustercapacities"},
		{http.MethodPost, "/apis/scheduling.bex.co/v1alpha1/placementreviews", "create placementreviews"},
		{http.MethodPatch, "/apis/platform.bex.co/v1alpha1/namespaces/tenant-0001/apps/app-00001/status", "patch apps/status"},
		{http.MethodPut, "/apis/platform.bex.co/v1alpha1/namespaces/tenant-0001/apps/app-00001", "update apps"},
		{http.MethodGet, "/api/v1/namespaces", "list namespaces"},
		{http.MethodGet, "/api/v1/namespaces/tenant-0001", "get namespaces"},
		{http.MethodGet, "/version", "other"},
	} {
		u, err := url.Parse(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestKey(&http.Request{Method: tc.method, URL: u}); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := defaultOptions().validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	o := defaultOptions()
	o.clusters = 1
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "raise --clusters") {
		t.Fatalf("10,000 Apps on one cluster of 330 pods: %v", err)
	}
	o = defaultOptions()
	o.tenants = o.apps + 1
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--tenants") {
		t.Fatalf("more tenants than Apps: %v", err)
	}
}
