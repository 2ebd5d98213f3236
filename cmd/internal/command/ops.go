package command

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds the checks of one /readyz request.
const readyTimeout = 5 * time.Second

// Check is one readiness condition; its error says what is not ready.
type Check func(context.Context) error

// NewOpsRegistry returns the registry a command's components register
// their metrics with (docs/metrics.md), holding the Go and process
// collectors already; OpsHandler serves it.
func NewOpsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// OpsHandler serves /metrics (reg's), /healthz (200 while the process
// serves: liveness) and /readyz (200 when every check passes, else 503
// with the first failure: readiness).
func OpsHandler(reg prometheus.Gatherer, checks ...Check) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		for _, c := range checks {
			if err := c(ctx); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// Serve serves srv (its timeouts set by the caller, see httpserve)
// on l until ctx ends, then shuts it down, giving requests in flight up to
// grace to finish. It returns nil after a shutdown and the server's error
// otherwise.
func Serve(ctx context.Context, l net.Listener, srv *http.Server, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// BearerOnly serves h to requests that present token as a bearer token
// (Authorization: Bearer <token>) and answers 401 to the others: for
// loopback services, which tenants' processes may reach.
func BearerOnly(token string, h http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bex metrics"`)
			http.Error(w, "a bearer token is required (the platform's metrics token)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
