package pipeline

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

// Outcomes of a build (bex_builds_total, bex_build_duration_seconds) and
// of a push (bex_push_duration_seconds).
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
)

// durationBuckets cover a build or a push from a second to half an hour.
var durationBuckets = []float64{1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800}

// metrics are the pipeline's Prometheus metrics. Every label takes a value
// from a short list the platform fixes: the stacks the App API allows
// (unknown when a build fails before it detects one) and the outcomes
// above; never a tenant's or an app's name.
type metrics struct {
	builds        *prometheus.CounterVec
	buildDuration *prometheus.HistogramVec
	pushDuration  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		builds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bex_builds_total",
			Help: "Builds that ran, by outcome and stack.",
		}, []string{"outcome", "stack"}),
		buildDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bex_build_duration_seconds",
			Help:    "Time the builder took for a build, from checkout to the image in the registry, by outcome.",
			Buckets: durationBuckets,
		}, []string{"outcome"}),
		pushDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bex_push_duration_seconds",
			Help:    "Time from a git push accepted for a build to its release serving (or the push failing), by outcome.",
			Buckets: durationBuckets,
		}, []string{"outcome"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.builds, m.buildDuration, m.pushDuration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the pipeline's metrics: %w", err)
		}
	}
	return m, nil
}

// stackLabel is the stack label of a build: the stack the builder
// detected, else the one the App asks for, else unknown.
func stackLabel(detected, asked platformv1alpha1.Stack) string {
	for _, s := range []platformv1alpha1.Stack{detected, asked} {
		switch s {
		case platformv1alpha1.StackGo, platformv1alpha1.StackNode, platformv1alpha1.StackPython,
			platformv1alpha1.StackStatic, platformv1alpha1.StackProcfile, platformv1alpha1.StackDockerfile:
			return string(s)
		}
	}
	return "unknown"
}
