package fleetupgrade

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
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

// ProbeNamespace holds the Apps the management cluster's verifier creates
// and deletes on each apiserver.
const ProbeNamespace = "bex-verify"

// ManagementRunVerifier is the Verifier of the management cluster, where the
// platform's own APIs are served: verify.Run with Options, plus, on every
// apiserver, the App CRD (an App created, read, listed and deleted in
// ProbeNamespace, which it creates when missing) and the scheduling API's
// clustercapacities (listed). MVP proxies neither, so each server must
// serve them itself.
type ManagementRunVerifier struct {
	Options verify.Options
}

var _ Verifier = ManagementRunVerifier{}

// Verify implements Verifier.
func (v ManagementRunVerifier) Verify(ctx context.Context, targets []verify.Target) (verify.Report, error) {
	opts := v.Options
	opts.CRDs = append(slices.Clone(opts.CRDs), verify.AppProbe())
	opts.Namespace = ProbeNamespace
	capacities := schedulingv1alpha1.SchemeGroupVersion.WithResource("clustercapacities")
	if !slices.Contains(opts.Aggregated, capacities) {
		opts.Aggregated = append(slices.Clone(opts.Aggregated), capacities)
	}
	if len(targets) > 0 && targets[0].Config != nil {
		if err := ensureNamespace(ctx, targets[0].Config, ProbeNamespace); err != nil {
			return verify.Report{}, err
		}
	}
	return verify.Run(ctx, targets, opts)
}

// ensureNamespace creates namespace name unless it exists.
func ensureNamespace(ctx context.Context, cfg *rest.Config, name string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client for the probes' namespace %s: %w", name, err)
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the probes' namespace %s: %w", name, err)
	}
	return nil
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
