package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// The limiter counts each tenant's streams apart, refuses the one past the
// cap with a 429 that names it, and makes room when a stream ends, once.
func TestStreamLimiter(t *testing.T) {
	l := newStreamLimiter(2)
	endA1, err := l.start("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.start("a"); err != nil {
		t.Fatal(err)
	}
	_, err = l.start("a")
	var he *httpError
	if !errors.As(err, &he) || he.status != http.StatusTooManyRequests || !strings.Contains(he.message, "at most 2 logs") {
		t.Fatalf("third stream of a: %v, want 429 naming the cap", err)
	}
	if _, err := l.start("b"); err != nil {
		t.Fatalf("another tenant's stream: %v", err)
	}
	endA1()
	endA1() // a second call counts nothing
	if _, err := l.start("a"); err != nil {
		t.Fatalf("a stream after one ended: %v", err)
	}
	if _, err := l.start("a"); err == nil {
		t.Fatal("a's streams went past the cap after a doubled end")
	}
}
