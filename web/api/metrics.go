package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/appmetrics"
	"bex.co/bex/web/api/apiclient"
)

// AppMetricsSource keeps the apps' series (*appmetrics.Sampler).
type AppMetricsSource interface {
	// Series returns the app's points after now-since; false when it
	// keeps none of the app.
	Series(tenant, app string, since time.Duration, now time.Time) (appmetrics.Series, bool)
	// Interval is the series' resolution, Retention how far back they go.
	Interval() time.Duration
	Retention() time.Duration
}

var _ AppMetricsSource = (*appmetrics.Sampler)(nil)

// appMetrics answers an app's series over the last since (the whole
// retention by default).
func (s *Server) appMetrics(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	if s.appMetricsSrc == nil {
		return &httpError{status: http.StatusNotImplemented,
			message: "this server keeps no per-app metrics (docs/metrics.md says which do)"}
	}
	interval, retention := s.appMetricsSrc.Interval(), s.appMetricsSrc.Retention()
	since := retention
	if q := c.QueryParam("since"); q != "" {
		d, err := time.ParseDuration(q)
		if err != nil || d < interval || d > retention {
			return badRequest("since %.40q: want a duration from %s to %s, such as 15m", q, interval, retention)
		}
		since = d
	}
	series, _ := s.appMetricsSrc.Series(principalOf(c).tenant.Name, app.Name, since, time.Now())
	out := apiclient.AppMetrics{App: app.Name, IntervalSeconds: interval.Seconds(), SinceSeconds: since.Seconds(),
		Note: series.UsageNote, Points: make([]apiclient.MetricPoint, 0, len(series.Points))}
	for _, p := range series.Points {
		out.Points = append(out.Points, apiclient.MetricPoint{
			Time: p.Time.UTC(), CPUCores: p.CPUCores, MemoryBytes: p.MemoryBytes, Instances: p.Instances, Restarts: p.Restarts,
			Requests: p.Requests, Errors: p.Errors, P50Seconds: p.P50Seconds, P99Seconds: p.P99Seconds,
		})
	}
	if len(out.Points) == 0 && out.Note == "" {
		out.Note = fmt.Sprintf("no point yet: apps are sampled every %s", interval)
	}
	return c.JSON(http.StatusOK, out)
}
