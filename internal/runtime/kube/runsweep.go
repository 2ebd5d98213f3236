package kube

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
)

var _ runtime.RunReaper = (*Driver)(nil)

// Bounds of one SweepRuns call: it reads at most maxSweepPages pages of
// sweepPageSize run Pods, as many of build Pods, and deletes at most
// maxSweepDeletes Pods in all; what is left waits for the next call.
const (
	sweepPageSize   = 500
	maxSweepPages   = 10
	maxSweepDeletes = 100
)

// SweepRuns implements runtime.RunReaper: it deletes, in every namespace,
// the run Pods that are kept no longer (the Pods of detached runs kept
// Options.RunLogRetention past their command's end, those of other runs
// a minute past it, and those past their active deadline and grace period
// whose Run is gone), so that none waits for its app's next run; and so
// the build Pods (StartBuild) a minute past their end or past their
// deadline, which a builder that stopped mid-build leaves until the app's
// next build. It lists those Pods only (by their labels), in pages, and
// logs the Pods it deleted once per call. Their Secrets go with them (the
// Pods own them). It returns the first error and goes on past it.
func (d *Driver) SweepRuns(ctx context.Context) error {
	managed, err := k8slabels.NewRequirement(LabelManagedBy, selection.Equals, []string{managedBy})
	if err != nil {
		return err
	}
	var deleted []string
	var first error
	now := time.Now()
	for _, kind := range []struct{ label, what string }{{LabelRunOf, "one-off runs"}, {LabelBuildOf, "builds"}} {
		of, err := k8slabels.NewRequirement(kind.label, selection.Exists, nil)
		if err != nil {
			return err
		}
		sel := client.MatchingLabelsSelector{Selector: k8slabels.NewSelector().Add(*of, *managed)}
		var serr error
		deleted, serr = d.sweep(ctx, sel, kind.what, now, deleted)
		first = cmp.Or(first, serr)
	}
	if len(deleted) > 0 {
		logr.FromContextOrDiscard(ctx).Info("Deleted the Pods of ended one-off runs and builds", "count", len(deleted), "pods", deleted)
	}
	return first
}

// sweep deletes the Pods of sel past their keeping (pastKeeping), adding
// them to deleted, within the bounds of one SweepRuns call; what names
// them in errors.
func (d *Driver) sweep(ctx context.Context, sel client.MatchingLabelsSelector, what string, now time.Time, deleted []string) ([]string, error) {
	var first error
	next := ""
	for range maxSweepPages {
		if len(deleted) == maxSweepDeletes {
			break
		}
		var pods corev1.PodList
		if err := d.c.List(ctx, &pods, sel, client.Limit(sweepPageSize), client.Continue(next)); err != nil {
			first = fmt.Errorf("listing the pods of %s: %w", what, err)
			break
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if len(deleted) == maxSweepDeletes {
				break
			}
			if p.DeletionTimestamp != nil || !d.pastKeeping(p, now) {
				continue
			}
			err := d.c.Delete(ctx, p, client.GracePeriodSeconds(int64(d.opts.RunGracePeriod.Seconds())), client.Preconditions{UID: &p.UID})
			switch {
			case err == nil:
				deleted = append(deleted, p.Namespace+"/"+p.Name)
			case !gone(err):
				first = cmp.Or(first, fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err))
			}
		}
		next = pods.Continue
		if next == "" {
			break
		}
	}
	return deleted, first
}

// EndRun implements runtime.RunReaper: the app's run Pods labelled
// LabelRunID runID that have not ended are stopped as Run stops them when
// its context ends, without waiting: a logged run's (a detached run's) by
// its activeDeadlineSeconds lowered to 1, so that it keeps its lines for
// Logs (deleted when the patch is refused), another's deleted with
// Options.RunGracePeriod. Their Secrets
// (their environment) are deleted. A Pod the kubelet does not stop at its
// lowered deadline is deleted by SweepRuns once past it.
func (d *Driver) EndRun(ctx context.Context, tenant, app, runID string) error {
	if errs := validation.IsValidLabelValue(runID); runID == "" || len(errs) > 0 {
		return fmt.Errorf("run ID %q is not one a run pod is labelled with", runID)
	}
	ns := d.opts.Namespace(tenant)
	sel := runSelector(app)
	sel[LabelRunID] = runID
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.InNamespace(ns), sel); err != nil {
		return fmt.Errorf("listing the pods of run %s of %s/%s: %w", runID, ns, app, err)
	}
	var first error
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		r := &oneOff{d: d, ns: p.Namespace, name: p.Name, uid: p.UID, logged: p.Labels[LabelRunInstance] != ""}
		// A logged run's Pod is kept for its lines; deleted when its
		// deadline cannot be lowered (a role without the right to patch
		// Pods).
		stopped := false
		if r.logged {
			stopped = gone(r.lowerDeadline(ctx))
		}
		if !stopped {
			if err := r.deletePod(ctx); !gone(err) {
				first = cmp.Or(first, fmt.Errorf("stopping pod %s/%s: %w", p.Namespace, p.Name, err))
				continue
			}
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
		first = cmp.Or(first, d.deleteIgnoringNotFound(ctx, secret))
	}
	return first
}

// gone reports whether err, of a call on a Pod, leaves nothing to do: nil,
// or the Pod is gone or was replaced by another of its name (a conflict
// on its UID).
func gone(err error) bool {
	return err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err)
}
