package edge

import "testing"

// TestProxyForget: the round-robin counters of claims no longer served go,
// the others stay.
func TestProxyForget(t *testing.T) {
	p, err := New(&Table{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ups := []string{"127.0.0.1:1", "127.0.0.1:2"}
	for _, c := range []string{"a.test", "b.test", "*.c.test"} {
		p.pick(Route{Claim: c, PathPrefix: "/"}, ups, "")
		p.pick(Route{Claim: c, PathPrefix: "/api"}, ups, "")
	}
	p.forget(func(claim string) bool { return claim == "b.test" })
	var left []string
	p.next.Range(func(k, _ any) bool { left = append(left, k.(string)); return true })
	if len(left) != 2 || left[0][:6] != "b.test" || left[1][:6] != "b.test" {
		t.Errorf("counters left: %q, want b.test's two", left)
	}
}
