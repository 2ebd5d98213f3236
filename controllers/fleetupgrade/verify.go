package fleetupgrade

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/internal/upgrade/verify"
)

// KubeconfigKey is the key of Cluster API's kubeconfig Secret
// ("<cluster>-kubeconfig") that holds the kubeconfig.
const KubeconfigKey = "value"

// maxEvidence is how many failed probes a verdict's message spells out.
const maxEvidence = 5

// verify runs the verifier on every live apiserver of the cluster and
// judges the report.
func (r *Reconciler) verify(ctx context.Context, s *scope, cs *clusterScope) (fleetv1.Verification, []verify.Probe) {
	v := fleetv1.Verification{Time: metav1.NewTime(s.now)}
	targets, err := r.targets(ctx, s, cs)
	if err != nil {
		v.Reason, v.Message = fleetv1.FleetUpgradeClusterUnreachableReason, "cannot build the verifier's targets: "+err.Error()
		return v, nil
	}
	for _, t := range targets {
		v.APIServers = append(v.APIServers, t.Name)
	}
	verifier := r.Verifier
	if r.ManagementVerifier != nil && cs.cluster.Labels[plan.ManagementLabel] == "true" {
		verifier = r.ManagementVerifier
	}
	rep, err := verifier.Verify(ctx, targets)
	r.metrics.countProbes(rep.Probes)
	if err != nil {
		v.Reason, v.Message = fleetv1.FleetUpgradeClusterUnreachableReason, "the verifier could not verify: "+err.Error()
		r.metrics.countVerification(VerifyUnreachable)
		return v, rep.Probes
	}
	v.Passed, v.Reason, v.Message = judge(rep, int(s.fu.Spec.Gates.MaxSpurious404))
	if v.Passed {
		r.metrics.countVerification(VerifyPassed)
	} else {
		r.metrics.countVerification(VerifyFailed)
	}
	return v, rep.Probes
}

// targets reads the cluster's kubeconfig Secret and returns one target per
// live control-plane machine.
func (r *Reconciler) targets(ctx context.Context, s *scope, cs *clusterScope) ([]verify.Target, error) {
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: cs.key.Namespace, Name: cs.key.Name + "-kubeconfig"}
	// Uncached (reader): a Secret read through Client would make the
	// manager cache every Secret, data included.
	if err := r.reader().Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("reading kubeconfig Secret %s: %w", key, err)
	}
	data := secret.Data[KubeconfigKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("kubeconfig Secret %s has no key %q", key, KubeconfigKey)
	}
	build := r.RESTConfig
	if build == nil {
		build = DefaultRESTConfig
	}
	cfg, err := build(data)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig of %s: %w", cs.key, err)
	}
	port := s.opts.APIServerPort
	if port == 0 {
		port = cs.cluster.Spec.ControlPlaneEndpoint.Port
	}
	targets, _, err := Targets(cfg, port, cs.machines)
	return targets, err
}

// judge turns a verifier report into the gate's verdict: passed when the
// report passed, or when its only failures are at most maxSpurious404
// spurious 404s. The message names the failed probes' apiserver, verb,
// resource, status and answer.
func judge(rep verify.Report, maxSpurious404 int) (passed bool, reason, message string) {
	failures := rep.Failures()
	spurious := 0
	for _, p := range failures {
		if p.Outcome == verify.Spurious404 {
			spurious++
		}
	}
	switch {
	case rep.Passed() && len(rep.Probes) == 0:
		return true, fleetv1.FleetUpgradeMVPVerifiedReason, fmt.Sprintf("the discovery of %d apiservers read; nothing to probe: they serve the same resources, and no baseline or CRD probe is configured", apiservers(rep))
	case rep.Passed():
		return true, fleetv1.FleetUpgradeMVPVerifiedReason, fmt.Sprintf("%d probes on %d apiservers passed", len(rep.Probes), apiservers(rep))
	case len(failures) == 0:
		return false, fleetv1.FleetUpgradeProbeFailedReason, "the verifier did not pass although no probe failed: its findings are in the upgrade records"
	case spurious == len(failures) && spurious <= maxSpurious404:
		return true, fleetv1.FleetUpgradeMVPVerifiedReason, fmt.Sprintf("%d probes on %d apiservers passed but %d spurious 404s, within gates.maxSpurious404 (%d): %s",
			len(rep.Probes)-spurious, apiservers(rep), spurious, maxSpurious404, evidence(failures))
	case spurious > 0:
		return false, fleetv1.FleetUpgradeSpurious404Reason, fmt.Sprintf("%d of %d probes failed (%d spurious 404s, gates.maxSpurious404 is %d): %s",
			len(failures), len(rep.Probes), spurious, maxSpurious404, evidence(failures))
	default:
		return false, fleetv1.FleetUpgradeProbeFailedReason, fmt.Sprintf("%d of %d probes failed: %s", len(failures), len(rep.Probes), evidence(failures))
	}
}

// apiservers counts the servers of the report: those whose discovery
// was read, and those probed.
func apiservers(rep verify.Report) int {
	seen := map[string]bool{}
	for _, d := range rep.Discovery {
		seen[d.APIServer] = true
	}
	for _, p := range rep.Probes {
		seen[p.APIServer] = true
	}
	return len(seen)
}

// evidence spells out the first failed probes.
func evidence(failures []verify.Probe) string {
	var parts []string
	for i, p := range failures {
		if i == maxEvidence {
			parts = append(parts, fmt.Sprintf("and %d more", len(failures)-maxEvidence))
			break
		}
		res := p.Resource.Group + "/" + p.Resource.Version + " " + p.Resource.Resource
		if p.Resource.Group == "" {
			res = p.Resource.Version + " " + p.Resource.Resource
		}
		verb := p.Verb
		if verb == "" {
			verb = "list"
		}
		part := fmt.Sprintf("apiserver %s answered %s %s with %d (%s)", p.APIServer, verb, res, p.Status, p.Outcome)
		if msg := strings.TrimSpace(p.Message); msg != "" {
			if len(msg) > 200 {
				msg = msg[:200] + "…"
			}
			part += ": " + msg
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}
