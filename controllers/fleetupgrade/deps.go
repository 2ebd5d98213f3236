package fleetupgrade

import (
	"context"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"bex.co/bex/internal/store"
	"bex.co/bex/internal/upgrade/verify"
)

// Verifier runs the MVP verifier once against the given apiservers, each
// reached directly. It returns an error only when it could not verify at
// all (a target unreachable, its discovery unreadable); what it found is in
// the Report. It must honour ctx and may be called concurrently for
// different clusters.
type Verifier interface {
	Verify(ctx context.Context, targets []verify.Target) (verify.Report, error)
}

// RunVerifier is the Verifier of production: verify.Run with Options.
type RunVerifier struct {
	Options verify.Options
}

var _ Verifier = RunVerifier{}

// Verify implements Verifier.
func (v RunVerifier) Verify(ctx context.Context, targets []verify.Target) (verify.Report, error) {
	return verify.Run(ctx, targets, v.Options)
}

// RESTConfigFunc builds the rest.Config of a workload cluster from the
// value of its kubeconfig Secret (Cluster API's "<cluster>-kubeconfig", key
// "value"). The server it names is replaced per machine (see Targets).
type RESTConfigFunc func(kubeconfig []byte) (*rest.Config, error)

// DefaultRESTConfig reads a kubeconfig with client-go.
func DefaultRESTConfig(kubeconfig []byte) (*rest.Config, error) {
	return clientcmd.RESTConfigFromKubeConfig(kubeconfig)
}

// Records keeps the history of upgrade runs: one run per FleetUpgrade UID,
// a step per preflight verdict, MVP wiring, version bump, machine
// replacement and verifier round, and every probe of every round.
// *store.Store implements it. Calls may come from concurrent reconciles of
// different FleetUpgrades; StartUpgradeRun for a UID that has a run returns
// that run; a run that ended refuses new steps and states (an error).
type Records interface {
	StartUpgradeRun(ctx context.Context, n store.NewUpgradeRun) (store.UpgradeRun, error)
	SetUpgradeRunState(ctx context.Context, runID string, state store.UpgradeRunState, message string) (store.UpgradeRun, error)
	StartUpgradeStep(ctx context.Context, runID string, n store.NewUpgradeStep) (store.UpgradeStep, error)
	FinishUpgradeStep(ctx context.Context, stepID string, outcome store.UpgradeStepOutcome, message string) (store.UpgradeStep, error)
	RecordProbes(ctx context.Context, stepID string, samples []store.ProbeSample) error
}

var _ Records = (*store.Store)(nil)
