package edge

import (
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are the edge's per-route Prometheus metrics. The host label is
// the name that claimed the request (Route.Claim: a Route's hostname, a
// wildcard as "*.example.com", or an app's default hostname), never the
// hostname the client sent; a request no route claims is counted with
// empty tenant and app and host "unknown". A client inventing hostnames,
// under a wildcard Route or outside any, cannot grow the label set. The
// status is counted by class ("2xx", ..., "5xx"), not by code: an app
// answers any number from 100 to 999 it likes, which would give each
// route up to 900 series. The series of a route the Table no longer
// serves are deleted (Server.forgetGone).
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	bytes    *prometheus.CounterVec
}

// unknownHost is the host label of requests no route claims.
const unknownHost = "unknown"

// NewMetrics registers the edge's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	labels := []string{"tenant", "app", "host"}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bex_edge_requests_total",
			Help: "Requests the edge answered, by route and status class (2xx, 5xx, ...).",
		}, append(labels, "class")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bex_edge_request_duration_seconds",
			Help:    "Time from the request's arrival to the end of its response, by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, labels),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bex_edge_response_bytes_total",
			Help: "Response body bytes the edge sent, by route.",
		}, labels),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.bytes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// forget deletes the series of every route for which serves is false:
// those of a deleted Route or app, so that apps that come and go do not
// leave series behind forever. The series of unknown hosts stay.
func (m *Metrics) forget(serves func(tenant, app, claim string) bool) int {
	ch := make(chan prometheus.Metric)
	go func() { m.bytes.Collect(ch); close(ch) }()
	var gone []prometheus.Labels
	for metric := range ch {
		var d dto.Metric
		if err := metric.Write(&d); err != nil {
			continue
		}
		l := prometheus.Labels{}
		for _, lp := range d.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["host"] != unknownHost && !serves(l["tenant"], l["app"], l["host"]) {
			gone = append(gone, l)
		}
	}
	for _, l := range gone {
		m.requests.DeletePartialMatch(l)
		m.duration.Delete(l)
		m.bytes.Delete(l)
	}
	return len(gone)
}

// observe records one request.
func (m *Metrics) observe(o Observation) {
	tenant, app, host := "", "", unknownHost
	if o.Matched {
		tenant, app, host = o.Route.Tenant, o.Route.App, o.Route.claim()
	}
	m.requests.WithLabelValues(tenant, app, host, StatusClass(o.Status)).Inc()
	m.duration.WithLabelValues(tenant, app, host).Observe(o.Duration.Seconds())
	m.bytes.WithLabelValues(tenant, app, host).Add(float64(o.Bytes))
}

// StatusClass is the class label of an HTTP status: "1xx" to "5xx", and
// "other" for a status outside 100-599.
func StatusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status/100) + "xx"
}

// accessLog writes one line per request.
func accessLog(log logr.Logger, o Observation) {
	r := o.Request
	log.Info("Request", "host", r.Host, "method", r.Method, "path", r.URL.Path, "status", o.Status,
		"bytes", o.Bytes, "duration", o.Duration.Round(time.Microsecond).String(), "tenant", o.Route.Tenant,
		"app", o.Route.App, "upstream", o.Upstream, "remote", r.RemoteAddr, "proto", r.Proto)
}
