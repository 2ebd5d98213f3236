package fleetupgrade

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"bex.co/bex/internal/upgrade/verify"
)

// Steps of a reconcile (the step label of bex_fleetupgrade_steps_total):
// the phases in their order, and the verification of a cluster after a
// machine replacement and before the version bump.
const (
	StepPlan   = "plan"
	StepAbort  = "abort"
	StepStages = "stages"
	StepVerify = "verify"
)

// Outcomes of a step. A phase either ends the round (done), lets the next
// phase run (continue) or fails (error); a verification passed, failed
// its gate, or could not run (unreachable).
const (
	OutcomeDone       = "done"
	OutcomeContinue   = "continue"
	OutcomeError      = "error"
	VerifyPassed      = "passed"
	VerifyFailed      = "failed"
	VerifyUnreachable = "unreachable"
)

// metrics are the FleetUpgrade controller's. The labels take values from
// the constants above and verify.Outcomes only: no cluster or FleetUpgrade
// name.
type metrics struct {
	steps  *prometheus.CounterVec
	probes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bex_fleetupgrade_steps_total",
			Help: "Steps the FleetUpgrade controller ran, by step and outcome.",
		}, []string{"step", "outcome"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bex_verifier_probes_total",
			Help: "Probes the MVP verifier made of the apiservers of clusters being upgraded, by outcome.",
		}, []string{"outcome"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.steps, m.probes} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("fleetupgrade reconciler: registering its metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) countStep(step string, done bool, err error) {
	if m == nil {
		return
	}
	outcome := OutcomeContinue
	switch {
	case err != nil:
		outcome = OutcomeError
	case done:
		outcome = OutcomeDone
	}
	m.steps.WithLabelValues(step, outcome).Inc()
}

func (m *metrics) countVerification(outcome string) {
	if m == nil {
		return
	}
	m.steps.WithLabelValues(StepVerify, outcome).Inc()
}

func (m *metrics) countProbes(probes []verify.Probe) {
	if m == nil {
		return
	}
	for _, p := range probes {
		m.probes.WithLabelValues(string(p.Outcome)).Inc()
	}
}
