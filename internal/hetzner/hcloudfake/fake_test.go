package hcloudfake_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"bex.co/bex/internal/hetzner/hcloudfake"
)

func get(t *testing.T, f *hcloudfake.Fake, method, path, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, f.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+hcloudfake.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: body %q is not JSON: %v", method, path, raw, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	return resp.StatusCode, resp.Header, out
}

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	if _, ok := e["message"].(string); !ok {
		return "no message"
	}
	return c
}

func TestErrorBodies(t *testing.T) {
	f := hcloudfake.New(hcloudfake.Options{})
	defer f.Close()
	f.AddLocation("fsn1", "eu-central")
	s := f.AddServer(hcloudfake.ServerSpec{Name: "a", Location: "fsn1"})
	lb := f.AddLoadBalancer(hcloudfake.LoadBalancerSpec{Name: "api", Location: "fsn1", ListenPorts: []int{6443}, Targets: []int64{s}})
	lbPath := "/load_balancers/" + strconv.FormatInt(lb, 10)
	target := `{"type":"server","server":{"id":` + strconv.FormatInt(s, 10) + `}}`

	status, _, body := get(t, f, http.MethodGet, "/servers/999", "")
	if status != http.StatusNotFound || errorCode(body) != "not_found" {
		t.Errorf("unknown server: %d %v", status, body)
	}
	status, _, body = get(t, f, http.MethodPost, lbPath+"/actions/add_target", target)
	if status != http.StatusUnprocessableEntity || errorCode(body) != "target_already_defined" {
		t.Errorf("add twice: %d %v", status, body)
	}
	status, _, body = get(t, f, http.MethodPost, lbPath+"/actions/remove_target", target)
	if status != http.StatusCreated {
		t.Fatalf("remove: %d %v", status, body)
	}
	action := body["action"].(map[string]any)
	if action["status"] != "running" || action["command"] != "remove_target" {
		t.Errorf("action = %v", action)
	}
	// While the removal runs the load balancer is locked.
	status, _, body = get(t, f, http.MethodPost, lbPath+"/actions/remove_target", target)
	if status != http.StatusLocked || errorCode(body) != "locked" {
		t.Errorf("remove while locked: %d %v", status, body)
	}
	id := strconv.FormatInt(int64(action["id"].(float64)), 10)
	_, _, body = get(t, f, http.MethodGet, "/actions/"+id, "")
	if got := body["action"].(map[string]any)["status"]; got != "success" {
		t.Errorf("action status after two requests = %v", got)
	}
	status, _, body = get(t, f, http.MethodPost, lbPath+"/actions/remove_target", target)
	if status != http.StatusNotFound || errorCode(body) != "load_balancer_target_not_found" {
		t.Errorf("remove twice: %d %v", status, body)
	}

	f.RateLimit(1)
	status, hdr, body := get(t, f, http.MethodGet, "/servers", "")
	if status != http.StatusTooManyRequests || errorCode(body) != "rate_limit_exceeded" || hdr.Get("RateLimit-Remaining") != "0" {
		t.Errorf("rate limited: %d %v %v", status, hdr, body)
	}
	status, _, body = get(t, f, http.MethodGet, "/servers?per_page=1", "")
	meta := body["meta"].(map[string]any)["pagination"].(map[string]any)
	if status != http.StatusOK || meta["total_entries"] != float64(1) || meta["next_page"] != float64(0) {
		t.Errorf("list: %d %v", status, body)
	}
}

func TestUnauthorized(t *testing.T) {
	f := hcloudfake.New(hcloudfake.Options{})
	defer f.Close()
	c := hcloud.NewClient(hcloud.WithEndpoint(f.URL()), hcloud.WithToken("wrong"))
	_, err := c.Server.All(context.Background())
	if !hcloud.IsError(err, hcloud.ErrorCodeUnauthorized) {
		t.Fatalf("err = %v", err)
	}
}

// Pagination works through hcloud-go's iterator.
func TestPagination(t *testing.T) {
	f := hcloudfake.New(hcloudfake.Options{})
	defer f.Close()
	for i := range 60 {
		f.AddServer(hcloudfake.ServerSpec{Name: "s" + strconv.Itoa(i), Labels: map[string]string{"n": strconv.Itoa(i % 2)}})
	}
	all, err := f.Client().Server.AllWithOpts(context.Background(), hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "n=1"}})
	if err != nil || len(all) != 30 {
		t.Fatalf("got %d servers, %v", len(all), err)
	}
}

// FailAlways fails every matching request until ClearFailures; FailNext
// only the next one.
func TestFailAlwaysUntilCleared(t *testing.T) {
	f := hcloudfake.New(hcloudfake.Options{})
	defer f.Close()
	s := f.AddServer(hcloudfake.ServerSpec{Name: "a"})
	path := "/servers/" + strconv.FormatInt(s, 10)
	f.FailAlways(http.MethodGet, path, http.StatusForbidden, "forbidden", "insufficient permissions for this request")
	for i := range 3 {
		if status, _, body := get(t, f, http.MethodGet, path, ""); status != http.StatusForbidden || errorCode(body) != "forbidden" {
			t.Fatalf("request %d: %d %v", i, status, body)
		}
	}
	f.ClearFailures()
	if status, _, body := get(t, f, http.MethodGet, path, ""); status != http.StatusOK {
		t.Fatalf("after ClearFailures: %d %v", status, body)
	}
	f.FailNext(http.MethodGet, path, http.StatusServiceUnavailable, "unavailable", "try again")
	if status, _, _ := get(t, f, http.MethodGet, path, ""); status != http.StatusServiceUnavailable {
		t.Fatalf("FailNext: %d", status)
	}
	if status, _, _ := get(t, f, http.MethodGet, path, ""); status != http.StatusOK {
		t.Fatalf("after FailNext: %d", status)
	}
}
