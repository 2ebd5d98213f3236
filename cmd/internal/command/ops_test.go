package command_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"bex.co/bex/cmd/internal/command"
)

// TestBearerOnly: the metrics endpoint answers 401 without the token or
// with another, and serves the metrics with it.
func TestBearerOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "bex_test_total", Help: "Test."})
	reg.MustRegister(c)
	c.Inc()
	srv := httptest.NewServer(command.BearerOnly("s3cret", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		auth string
		want int
	}{{"", 401}, {"Bearer wrong", 401}, {"Basic czNjcmV0", 401}, {"Bearer s3cret", 200}} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Authorization %q: %d, want %d", c.auth, resp.StatusCode, c.want)
		}
		if served := strings.Contains(string(body), "bex_test_total 1"); served != (c.want == 200) {
			t.Errorf("Authorization %q: metrics served = %v", c.auth, served)
		}
	}
}
