package app

import (
	"bex.co/bex/internal/edge"
	"bex.co/bex/web/dashboard"
)

// edgeTraffic gives the dashboard the edge's traffic per app.
type edgeTraffic struct{ rec *edge.TrafficRecorder }

func (t edgeTraffic) Traffic(tenant, app string) []dashboard.TrafficPoint {
	pts := t.rec.Traffic(tenant, app)
	out := make([]dashboard.TrafficPoint, len(pts))
	for i, p := range pts {
		out[i] = dashboard.TrafficPoint{At: p.At, Requests: p.Requests, Errors: p.Errors}
	}
	return out
}
