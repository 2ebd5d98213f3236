package fleetupgrade_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/controllers/localinfra/localinfratest"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/upgrade/verify"
	"bex.co/bex/test/platformtest"
)

// slowVerifier runs the real verifier after a delay and records each
// round: a verifier that takes long to pass.
type slowVerifier struct {
	delay time.Duration
	inner fleetupgrade.Verifier

	mu     sync.Mutex
	starts []time.Time
	rounds []round
}

type round struct {
	start, end time.Time
	passed     bool
}

func (v *slowVerifier) Verify(ctx context.Context, targets []verify.Target) (verify.Report, error) {
	start := time.Now()
	v.mu.Lock()
	v.starts = append(v.starts, start)
	v.mu.Unlock()
	select {
	case <-ctx.Done():
		return verify.Report{}, ctx.Err()
	case <-time.After(v.delay):
	}
	rep, err := v.inner.Verify(ctx, targets)
	v.mu.Lock()
	v.rounds = append(v.rounds, round{start: start, end: time.Now(), passed: err == nil && rep.Passed()})
	v.mu.Unlock()
	return rep, err
}

// passedBetween reports whether a round that started at or after from
// passed by to.
func (v *slowVerifier) passedBetween(from, to time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range v.rounds {
		if r.passed && !r.start.Before(from) && !r.end.After(to) {
			return true
		}
	}
	return false
}

// String lists the rounds, begun and ended.
func (v *slowVerifier) String() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var b strings.Builder
	for _, r := range v.rounds {
		fmt.Fprintf(&b, "%s-%s passed=%t; ", r.start.Format("15:04:05.000"), r.end.Format("15:04:05.000"), r.passed)
	}
	return b.String()
}

// startedSince reports whether a round started at or after from.
func (v *slowVerifier) startedSince(from time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.starts {
		if !s.Before(from) {
			return true
		}
	}
	return false
}

// passedAfter reports whether a round that ended after t passed.
func (v *slowVerifier) passedAfter(t time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range v.rounds {
		if r.passed && r.end.After(t) {
			return true
		}
	}
	return false
}

// machineTimes is what a watcher saw of one control-plane Machine.
type machineTimes struct {
	version                string
	marked, released, gone time.Time
	// markSeen is when the watcher saw the mark: DeletionTimestamp has
	// whole seconds.
	markSeen time.Time
}

// TestGateHoldsRealKubeadmControlPlane: the real KubeadmControlPlane rolls
// three local machines to the next version with maxSurge 0 at its own pace
// under a FleetUpgrade whose verifier takes 15 s a round. KCP marks each
// old machine for deletion as soon as its own checks pass, long before the
// verifier could; the gate's deletion hook holds the machine until a
// verification that began after KCP marked it has passed. No Machine goes
// before that, and the Cluster is never paused. An operator who pauses the
// FleetUpgrade while the round that would release a machine runs holds
// that machine, though the round passes.
func TestGateHoldsRealKubeadmControlPlane(t *testing.T) {
	// The two newest pinned versions: the ones make test builds.
	versions := kubebin.KubeVersions()
	from, to := "v"+versions[len(versions)-2], "v"+versions[len(versions)-1]
	v := &slowVerifier{delay: 15 * time.Second, inner: fleetupgrade.RunVerifier{}}
	f := localinfratest.Start(t, localinfratest.Options{Version: to, Setup: func(mgr ctrl.Manager) error {
		return (&fleetupgrade.Reconciler{
			Client: mgr.GetClient(), Verifier: v, Events: mgr.GetEventRecorder(fleetupgrade.ControllerName),
			Options: fleetupgrade.Options{PollInterval: time.Second, VerifyRetryInterval: 5 * time.Second},
		}).SetupWithManager(mgr)
	}})
	const ns, name = "default", "gated"
	o := localinfra.ClusterOptions{Namespace: ns, Name: name, Version: from, ControlPlaneReplicas: 3, Labels: map[string]string{"fleet": "gated"}}
	o.APIServerExtraArgs = localinfratest.WireMVPArgs(o)
	f.CreateCluster(t, o)
	f.WaitControlPlane(t, ns, name, from, 3, 10*time.Minute)

	// Watch the Machines and the Cluster all along.
	var mu sync.Mutex
	seen := map[string]*machineTimes{}
	paused := false
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		ctx := context.Background()
		for {
			now := time.Now()
			var list clusterv1.MachineList
			c := &clusterv1.Cluster{}
			if err := f.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err == nil {
				mu.Lock()
				present := map[string]bool{}
				for _, m := range list.Items {
					present[m.Name] = true
					mt := seen[m.Name]
					if mt == nil {
						mt = &machineTimes{version: m.Spec.Version}
						seen[m.Name] = mt
					}
					if !m.DeletionTimestamp.IsZero() && mt.marked.IsZero() {
						mt.marked, mt.markSeen = m.DeletionTimestamp.Time, now
					}
					if _, hooked := m.Annotations[fleetupgrade.GateHook]; !m.DeletionTimestamp.IsZero() && !hooked && mt.released.IsZero() {
						mt.released = now
					}
				}
				for n, mt := range seen {
					if !present[n] && mt.gone.IsZero() {
						mt.gone = now
					}
				}
				mu.Unlock()
			}
			if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err == nil && ptr.Deref(c.Spec.Paused, false) {
				mu.Lock()
				paused = true
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	fu := &fleetv1.FleetUpgrade{
		ObjectMeta: metav1.ObjectMeta{Name: "to-next"},
		Spec: fleetv1.FleetUpgradeSpec{
			TargetVersion:   to,
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"fleet": "gated"}},
			SoakTime:        &metav1.Duration{},
		},
	}
	if err := f.Client.Create(context.Background(), fu); err != nil {
		t.Fatal(err)
	}

	// The operator pauses while the round that would release the first
	// machine KCP marks runs: the round passes, and the pause still holds
	// the machine until the FleetUpgrade is resumed.
	// The round that releases it begins within milliseconds of the mark
	// (the Machine's update wakes the controller), before the watcher
	// sees the mark; the DeletionTimestamp has whole seconds, so the
	// round awaited is one begun in the mark's second. Should that one
	// have begun before the mark, the pause lands before the releasing
	// reconcile reads the FleetUpgrade, and the machine is held anyway.
	var first string
	var firstMarked, firstSeen time.Time
	platformtest.Eventually(t, 10*time.Minute, "KubeadmControlPlane to mark an old machine", func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		for n, mt := range seen {
			if !mt.markSeen.IsZero() {
				first, firstMarked, firstSeen = n, mt.marked, mt.markSeen
				return nil
			}
		}
		return errors.New("no machine marked")
	})
	platformtest.Eventually(t, time.Minute, "a verifier round begun since the mark", func(context.Context) error {
		if !v.startedSince(firstMarked) {
			return errors.New("none yet")
		}
		return nil
	})
	setPaused(t, f.Client, fu, true)
	pausedAt := time.Now()
	t.Logf("machine %s: marked in %s, seen marked at %s; the operator paused at %s", first, firstMarked.Format("15:04:05"),
		firstSeen.Format("15:04:05.000"), pausedAt.Format("15:04:05.000"))
	platformtest.Eventually(t, 2*time.Minute, "the round under way at the pause to pass and the pause reported", func(ctx context.Context) error {
		if !v.passedAfter(pausedAt) {
			return errors.New("no round passed since the pause")
		}
		got := &fleetv1.FleetUpgrade{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(fu), got); err != nil {
			return err
		}
		if len(got.Status.Clusters) != 1 || got.Status.Clusters[0].Phase != fleetv1.ClusterUpgradePhasePaused {
			return fmt.Errorf("clusters %+v", got.Status.Clusters)
		}
		return nil
	})
	mu.Lock()
	released := seen[first].released
	mu.Unlock()
	t.Logf("verifier rounds: %s", v.String())
	if !released.IsZero() {
		t.Errorf("machine %s was released at %s, after the operator paused at %s", first, released.Format(time.StampMilli), pausedAt.Format(time.StampMilli))
	}
	setPaused(t, f.Client, fu, false)

	platformtest.Eventually(t, 20*time.Minute, "the FleetUpgrade Succeeded", func(ctx context.Context) error {
		got := &fleetv1.FleetUpgrade{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(fu), got); err != nil {
			return err
		}
		if got.Status.Phase != fleetv1.FleetUpgradePhaseSucceeded {
			return fmt.Errorf("phase %s: %v", got.Status.Phase, got.Status.Conditions)
		}
		return nil
	})
	f.WaitControlPlane(t, ns, name, to, 3, 5*time.Minute)
	close(stop)
	<-watched

	mu.Lock()
	defer mu.Unlock()
	if paused {
		t.Error("the Cluster was paused: the gate holds machines by their deletion hook")
	}
	old := 0
	for n, mt := range seen {
		if mt.version != from {
			if !mt.marked.IsZero() {
				t.Errorf("machine %s of %s was deleted", n, mt.version)
			}
			continue
		}
		old++
		if mt.marked.IsZero() || mt.released.IsZero() || mt.gone.IsZero() {
			t.Errorf("old machine %s: marked %v, released %v, gone %v", n, mt.marked, mt.released, mt.gone)
			continue
		}
		if !v.passedBetween(mt.marked.Add(-time.Second), mt.released) {
			t.Errorf("machine %s was released at %s, with no verification begun after KCP marked it (%s) passed before",
				n, mt.released.Format(time.StampMilli), mt.marked.Format(time.StampMilli))
		}
		if held := mt.released.Sub(mt.marked); held < v.delay {
			t.Errorf("machine %s held %s, less than one verification (%s)", n, held, v.delay)
		}
		if mt.gone.Before(mt.released) {
			t.Errorf("machine %s went before its gate released it", n)
		}
		t.Logf("machine %s: KCP marked it for deletion at %s; the gate held it %s; gone %s after release",
			n, mt.marked.Format("15:04:05.000"), mt.released.Sub(mt.marked).Round(100*time.Millisecond), mt.gone.Sub(mt.released).Round(100*time.Millisecond))
	}
	if old != 3 {
		t.Errorf("%d old machines seen, want 3", old)
	}
}

// setPaused sets the FleetUpgrade's spec.paused, as the console's Pause
// and Resume buttons do.
func setPaused(t *testing.T, c client.Client, fu *fleetv1.FleetUpgrade, paused bool) {
	t.Helper()
	cur := &fleetv1.FleetUpgrade{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(fu), cur); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	cur.Spec.Paused = paused
	if err := c.Patch(context.Background(), cur, client.MergeFrom(base)); err != nil {
		t.Fatalf("setting spec.paused to %t: %v", paused, err)
	}
}
