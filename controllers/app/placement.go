package app

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/apiserver/scheduler"
	"bex.co/bex/internal/fleetstate"
)

// Placement is the outcome of placing an App.
type Placement struct {
	// Placed is true when the App has a Placement on a cluster of the
	// fleet; Cluster and Pool say where. When its cluster is gone from the
	// fleet and no other cluster takes it, Placed is false and Cluster and
	// Pool still name where the Placement points.
	Placed        bool
	Cluster, Pool string
	// MovedFrom is "cluster/pool" when this call moved the App, else "".
	MovedFrom string
	// Message explains the outcome: the score, the move and why, or why no
	// cluster fits.
	Message string
	// Static is true when the App stays on a static cluster (make run's
	// "local"): no cordon, deletion or change of capacity comes to it
	// while the platform runs, so the App need not be placed again until
	// it changes itself.
	Static bool
	// RecheckAfter, when not zero, is how soon the App may have to leave
	// its cluster with nothing changed but the clock: its pool has had no
	// ready node for less than NotReadyGrace.
	RecheckAfter time.Duration
}

// Placer places Apps on workload clusters. Calls are idempotent and
// level-based: each one looks at the App's Placement and the cluster it
// names as they are now.
type Placer interface {
	// Place returns the App's Placement. Without one it asks the scheduler
	// (a PlacementReview) and records its choice (a Placement named like
	// the App, in its namespace). With one it keeps it, updating replicas
	// and resources to what the App asks, unless its cluster can no longer
	// hold the App (gone from the fleet, being deleted, cordoned,
	// mid-upgrade, or its pool over-committed and the App among those
	// placed there last): then it asks the scheduler
	// again and moves the Placement when another cluster fits, and keeps it
	// where it is when none does. An unschedulable App is not an error:
	// Placed is false and Message says why.
	Place(ctx context.Context, app *platformv1alpha1.App) (Placement, error)
	// Unplace deletes the App's Placement; a missing one is fine.
	Unplace(ctx context.Context, app *platformv1alpha1.App) error
}

// SchedulerPlacer is the Placer over the scheduling.bex.co API: it reads
// Placements and ClusterCapacities, creates PlacementReviews, and creates
// and updates Placements through Client.
type SchedulerPlacer struct {
	Client client.Client
}

var _ Placer = SchedulerPlacer{}

// size is what an App asks of its Placement.
type size struct {
	Replicas int32
	// Resources of one replica, the plan's where the App sets none.
	Resources schedulingv1alpha1.Resources
	Plan      string
}

// wantedSize is the size the App asks for: the instances of all its
// processes (at least one, as a PlacementReview places), since each runs
// on the cluster with the same resources, and per instance its resources
// or its plan's.
func wantedSize(app *platformv1alpha1.App) size {
	s := size{Replicas: max(instances(app), 1), Plan: string(app.Spec.Plan)}
	if plan, ok := scheduler.PlanResources(s.Plan); ok {
		s.Resources = schedulingv1alpha1.Resources{CPU: plan.CPU, Memory: plan.Memory}
	}
	if r := app.Spec.Resources; r != nil {
		if r.CPU != nil && !r.CPU.IsZero() {
			s.Resources.CPU = r.CPU.DeepCopy()
		}
		if r.Memory != nil && !r.Memory.IsZero() {
			s.Resources.Memory = r.Memory.DeepCopy()
		}
	}
	return s
}

func (s size) String() string {
	return fmt.Sprintf("%d × (cpu %s, memory %s)", s.Replicas, s.Resources.CPU.String(), s.Resources.Memory.String())
}

// sizeOf is the size a Placement records.
func sizeOf(spec *schedulingv1alpha1.PlacementSpec) size {
	return size{Replicas: spec.Replicas, Resources: spec.Resources, Plan: spec.Plan}
}

// equal reports whether two sizes ask for the same.
func (s size) equal(o size) bool {
	return s.Replicas == o.Replicas && s.Plan == o.Plan &&
		s.Resources.CPU.Cmp(o.Resources.CPU) == 0 && s.Resources.Memory.Cmp(o.Resources.Memory) == 0
}

// resize sets the Placement's size and reports whether it changed.
func resize(spec *schedulingv1alpha1.PlacementSpec, want size) bool {
	if sizeOf(spec).equal(want) {
		return false
	}
	spec.Replicas, spec.Plan = want.Replicas, want.Plan
	spec.Resources = schedulingv1alpha1.Resources{CPU: want.Resources.CPU.DeepCopy(), Memory: want.Resources.Memory.DeepCopy()}
	return true
}

// Place implements Placer.
func (p SchedulerPlacer) Place(ctx context.Context, app *platformv1alpha1.App) (Placement, error) {
	want := wantedSize(app)
	existing := &schedulingv1alpha1.Placement{}
	err := p.Client.Get(ctx, types.NamespacedName{Namespace: app.Namespace, Name: app.Name}, existing)
	switch {
	case apierrors.IsNotFound(err):
		return p.placeNew(ctx, app, want)
	case err != nil:
		return Placement{}, fmt.Errorf("reading placement: %w", err)
	}
	cc := &schedulingv1alpha1.ClusterCapacity{}
	if err := p.Client.Get(ctx, types.NamespacedName{Name: existing.Spec.Cluster}, cc); apierrors.IsNotFound(err) {
		cc = nil
	} else if err != nil {
		return Placement{}, fmt.Errorf("reading the capacity of cluster %s: %w", existing.Spec.Cluster, err)
	}
	now := time.Now()
	reason, why := leaveReason(cc, &existing.Spec, want, now)
	if reason == schedulingv1alpha1.ReasonOverCommitted && sizeOf(&existing.Spec).equal(want) {
		// The pool holds less than its Placements request, the App's
		// unchanged: those placed there last leave, so that a pool short
		// of one App's room moves one App, not each that looks.
		stays, err := p.placedInTime(ctx, cc, existing)
		if err != nil {
			return Placement{}, err
		}
		if stays {
			reason = ""
		}
	}
	if reason == "" {
		pl, err := p.keep(ctx, existing, want)
		pl.Static = cc != nil && cc.Status.Source == fleetstate.SourceStatic
		pl.RecheckAfter = notReadyLeft(cc, existing.Spec.Pool, now)
		return pl, err
	}
	return p.move(ctx, app, existing, want, reason, why)
}

// review asks the scheduler where an App of the given size would go.
// With reserve, the caller records a schedulable answer as the App's
// Placement: bex-apiserver holds the chosen pool's room for it until it
// sees the Placement written, so that the reviews of the other workers
// count it meanwhile.
func (p SchedulerPlacer) review(ctx context.Context, app *platformv1alpha1.App, want size, reserve bool) (*schedulingv1alpha1.PlacementReview, error) {
	review := &schedulingv1alpha1.PlacementReview{Spec: schedulingv1alpha1.PlacementReviewSpec{
		App:         app.Name,
		Replicas:    want.Replicas,
		Resources:   want.Resources,
		Constraints: schedulingv1alpha1.PlacementConstraints{Plan: want.Plan},
		// The verdict is all the controller reads; an unschedulable
		// review's message still names every rejection.
		Candidates: schedulingv1alpha1.CandidatesNone,
	}}
	if reserve {
		review.Spec.Reserve = &schedulingv1alpha1.PlacementRef{Namespace: app.Namespace, Name: app.Name}
	}
	if err := p.Client.Create(ctx, review); err != nil {
		return nil, fmt.Errorf("asking the scheduler: %w", err)
	}
	return review, nil
}

// placeNew places an App that has no Placement.
func (p SchedulerPlacer) placeNew(ctx context.Context, app *platformv1alpha1.App, want size) (Placement, error) {
	review, err := p.review(ctx, app, want, true)
	if err != nil {
		return Placement{}, err
	}
	st := review.Status
	if !st.Schedulable {
		return Placement{Message: st.Message}, nil
	}
	placement := &schedulingv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: app.Name},
		Spec: schedulingv1alpha1.PlacementSpec{
			App: app.Name, Cluster: st.Cluster, Pool: st.Pool, Plan: want.Plan,
			Replicas: review.Spec.Replicas, Resources: st.Resources,
		},
	}
	if err := p.Client.Create(ctx, placement); err != nil && !apierrors.IsAlreadyExists(err) {
		return Placement{}, fmt.Errorf("recording placement: %w", err)
	}
	return Placement{Placed: true, Cluster: st.Cluster, Pool: st.Pool,
		Message: fmt.Sprintf("placed on %s/%s (score %d, %s)", st.Cluster, st.Pool, st.Score, st.Strategy)}, nil
}

// keep keeps a Placement whose cluster still holds the App, rescaled to
// what the App asks.
func (p SchedulerPlacer) keep(ctx context.Context, existing *schedulingv1alpha1.Placement, want size) (Placement, error) {
	s := &existing.Spec
	msg := fmt.Sprintf("placed on %s/%s", s.Cluster, s.Pool)
	if m := s.MovedFrom; m != nil {
		msg += fmt.Sprintf(", moved there from %s/%s at %s: %s", m.Cluster, m.Pool, m.Time.UTC().Format(time.RFC3339), m.Message)
	}
	if resize(s, want) {
		if err := p.Client.Update(ctx, existing); err != nil {
			return Placement{}, fmt.Errorf("rescaling placement: %w", err)
		}
		msg += ", rescaled to " + want.String()
	}
	return Placement{Placed: true, Cluster: s.Cluster, Pool: s.Pool, Message: msg}, nil
}

// move places again an App whose cluster can no longer hold it, for reason
// (explained by why). When the scheduler finds a cluster the Placement is
// updated in place; when it finds none the Placement stays where it is,
// rescaled to what the App asks.
func (p SchedulerPlacer) move(ctx context.Context, app *platformv1alpha1.App, existing *schedulingv1alpha1.Placement, want size, reason, why string) (Placement, error) {
	s := &existing.Spec
	from := s.Cluster + "/" + s.Pool
	review, err := p.review(ctx, app, want, true)
	if err != nil {
		return Placement{}, err
	}
	st := review.Status
	if !st.Schedulable {
		if resize(s, want) {
			if err := p.Client.Update(ctx, existing); err != nil {
				return Placement{}, fmt.Errorf("rescaling placement: %w", err)
			}
		}
		if reason == schedulingv1alpha1.ReasonClusterGone {
			return Placement{Cluster: s.Cluster, Pool: s.Pool,
				Message: fmt.Sprintf("%s (its Placement still names %s): %s", why, from, st.Message)}, nil
		}
		return Placement{Placed: true, Cluster: s.Cluster, Pool: s.Pool,
			Message: fmt.Sprintf("stays on %s although %s: no other cluster can take it (%s)", from, why, st.Message)}, nil
	}
	s.MovedFrom = &schedulingv1alpha1.PlacementMove{Cluster: s.Cluster, Pool: s.Pool, Reason: reason, Message: why, Time: metav1.Now()}
	s.Cluster, s.Pool = st.Cluster, st.Pool
	resize(s, want)
	if err := p.Client.Update(ctx, existing); err != nil {
		return Placement{}, fmt.Errorf("moving placement from %s to %s/%s: %w", from, st.Cluster, st.Pool, err)
	}
	logf.FromContext(ctx).Info("App moved", "from", from, "to", st.Cluster+"/"+st.Pool, "reason", reason)
	return Placement{Placed: true, Cluster: st.Cluster, Pool: st.Pool, MovedFrom: from,
		Message: fmt.Sprintf("moved from %s to %s/%s: %s (score %d, %s)", from, st.Cluster, st.Pool, why, st.Score, st.Strategy)}, nil
}

// placedInTime reports whether the pool of the Placement existing, on
// cluster cc, holds it with the Placements placed there before it: in the
// order they came to the pool (placedAt, then namespace and name), their
// requests up to and including its own are within the pool's
// allocatable. It is false when the pool is gone, or the listing does
// not show the Placement on it (read before the Placement came).
func (p SchedulerPlacer) placedInTime(ctx context.Context, cc *schedulingv1alpha1.ClusterCapacity, existing *schedulingv1alpha1.Placement) (bool, error) {
	var pool *schedulingv1alpha1.PoolCapacity
	for i := range cc.Status.Pools {
		if cc.Status.Pools[i].Name == existing.Spec.Pool {
			pool = &cc.Status.Pools[i]
		}
	}
	if pool == nil {
		return false, nil
	}
	var list schedulingv1alpha1.PlacementList
	if err := p.Client.List(ctx, &list, client.MatchingFields{"spec.cluster": existing.Spec.Cluster, "spec.pool": existing.Spec.Pool}); err != nil {
		return false, fmt.Errorf("listing the placements of %s/%s: %w", existing.Spec.Cluster, existing.Spec.Pool, err)
	}
	items := list.Items
	slices.SortFunc(items, func(a, b schedulingv1alpha1.Placement) int {
		return cmp.Or(placedAt(&a).Compare(placedAt(&b)), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	var before schedulingv1alpha1.PoolCapacity
	before.Allocatable = pool.Allocatable
	for i := range items {
		it := &items[i]
		if it.Spec.Cluster != existing.Spec.Cluster || it.Spec.Pool != existing.Spec.Pool {
			continue
		}
		if it.Namespace == existing.Namespace && it.Name == existing.Name {
			return overCommitted(before, size{}, sizeOf(&existing.Spec)) == "", nil
		}
		s := sizeOf(&it.Spec)
		before.Requested.CPU.Add(*resource.NewMilliQuantity(int64(s.Replicas)*s.Resources.CPU.MilliValue(), resource.DecimalSI))
		before.Requested.Memory.Add(*resource.NewQuantity(int64(s.Replicas)*s.Resources.Memory.Value(), resource.BinarySI))
		before.Requested.Pods += int64(s.Replicas)
	}
	return false, nil
}

// placedAt is when a Placement came to its pool: its last move, or its
// creation.
func placedAt(p *schedulingv1alpha1.Placement) time.Time {
	if m := p.Spec.MovedFrom; m != nil {
		return m.Time.Time
	}
	return p.CreationTimestamp.Time
}

// NotReadyGrace is how long an App's pool may have no Ready node before
// the App leaves it: Kubernetes' default for evicting Pods off an
// unreachable node (tolerationSeconds 300), past which the node is taken
// as lost rather than restarting.
const NotReadyGrace = 5 * time.Minute

// leaveReason says why an App placed by spec must leave its cluster, whose
// capacity is cc (nil: the cluster is gone from the fleet), at the size it
// wants, at time now: a reason of spec.movedFrom and a message, or "" when
// it stays. Unhealthy is no reason, nor a pool with no ready node for less
// than NotReadyGrace: it is often transient (a missed heartbeat, an
// apiserver or a node agent restarting), and the pool figures of an
// unhealthy cluster are not trusted either.
func leaveReason(cc *schedulingv1alpha1.ClusterCapacity, spec *schedulingv1alpha1.PlacementSpec, want size, now time.Time) (string, string) {
	if cc == nil {
		return schedulingv1alpha1.ReasonClusterGone, fmt.Sprintf("cluster %s is gone from the fleet", spec.Cluster)
	}
	st := &cc.Status
	switch {
	case st.Deleting:
		return schedulingv1alpha1.ReasonDeleting, fmt.Sprintf("%s is being deleted", cc.Name)
	case st.Cordoned:
		return schedulingv1alpha1.ReasonCordoned, fmt.Sprintf("%s is cordoned (annotation %s=true)", cc.Name, schedulingv1alpha1.CordonedAnnotation)
	case st.MidUpgrade:
		msg := fmt.Sprintf("%s is mid-upgrade", cc.Name)
		if st.Reason == schedulingv1alpha1.ReasonMidUpgrade && st.Message != "" {
			msg += " (" + st.Message + ")"
		}
		return schedulingv1alpha1.ReasonMidUpgrade, msg
	case !st.Healthy:
		return "", ""
	}
	for _, pool := range st.Pools {
		if pool.Name != spec.Pool {
			continue
		}
		if pool.ReadyNodes == 0 {
			// Its nodes are all not ready: as with an unhealthy cluster,
			// often for a while only (a node agent restarting). Past the
			// grace the pool is taken as lost: no other node of it can
			// take the app's Pods.
			if since := pool.NotReadySince; since != nil && now.Sub(since.Time) >= NotReadyGrace {
				return schedulingv1alpha1.ReasonNotReady, fmt.Sprintf("%s/%s has had no ready node since %s (more than %s)",
					cc.Name, pool.Name, since.UTC().Format(time.RFC3339), NotReadyGrace)
			}
			return "", ""
		}
		if short := overCommitted(pool, sizeOf(spec), want); short != "" {
			if sizeOf(spec).equal(want) {
				return schedulingv1alpha1.ReasonOverCommitted, fmt.Sprintf("%s/%s is over-committed (%s)", cc.Name, pool.Name, short)
			}
			return schedulingv1alpha1.ReasonOverCommitted, fmt.Sprintf("%s/%s cannot hold the app at %s (%s)", cc.Name, pool.Name, want, short)
		}
		return "", ""
	}
	return schedulingv1alpha1.ReasonOverCommitted, fmt.Sprintf("%s has no pool %s any more", cc.Name, spec.Pool)
}

// notReadyLeft is how long until the pool of cc, when it has no ready
// node, has had none for NotReadyGrace (and a second more); 0 when that
// is not pending.
func notReadyLeft(cc *schedulingv1alpha1.ClusterCapacity, pool string, now time.Time) time.Duration {
	if cc == nil || !cc.Status.Healthy {
		return 0
	}
	for _, p := range cc.Status.Pools {
		if p.Name != pool || p.ReadyNodes > 0 || p.NotReadySince == nil {
			continue
		}
		if left := NotReadyGrace - now.Sub(p.NotReadySince.Time); left > 0 {
			return left + time.Second
		}
	}
	return 0
}

// overCommitted compares what the pool's Placements request, with the
// App's placed at want instead of has, to what the pool can hold, and
// describes each shortage; "" when it holds them.
func overCommitted(pool schedulingv1alpha1.PoolCapacity, has, want size) string {
	cpu := pool.Requested.CPU.MilliValue() + int64(want.Replicas)*want.Resources.CPU.MilliValue() - int64(has.Replicas)*has.Resources.CPU.MilliValue()
	mem := pool.Requested.Memory.Value() + int64(want.Replicas)*want.Resources.Memory.Value() - int64(has.Replicas)*has.Resources.Memory.Value()
	pods := pool.Requested.Pods + int64(want.Replicas) - int64(has.Replicas)
	var short []string
	if alloc := pool.Allocatable.CPU.MilliValue(); cpu > alloc {
		short = append(short, fmt.Sprintf("cpu: %s requested, %s allocatable",
			resource.NewMilliQuantity(cpu, resource.DecimalSI), resource.NewMilliQuantity(alloc, resource.DecimalSI)))
	}
	if alloc := pool.Allocatable.Memory.Value(); mem > alloc {
		short = append(short, fmt.Sprintf("memory: %s requested, %s allocatable",
			resource.NewQuantity(mem, resource.BinarySI), resource.NewQuantity(alloc, resource.BinarySI)))
	}
	if alloc := pool.Allocatable.Pods; pods > alloc {
		short = append(short, fmt.Sprintf("pods: %d requested, %d allocatable", pods, alloc))
	}
	return strings.Join(short, "; ")
}

// Unplace implements Placer.
func (p SchedulerPlacer) Unplace(ctx context.Context, app *platformv1alpha1.App) error {
	pl := &schedulingv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: app.Name}}
	if err := p.Client.Delete(ctx, pl); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting placement: %w", err)
	}
	return nil
}

// instances is how many instances of its processes the App asks for: its
// web instances (1 unless it says), and those its other processes set (0
// unless they say, as a release runs them). The release phase runs once
// per release and is not counted.
func instances(app *platformv1alpha1.App) int32 {
	n, web := int32(0), false
	for _, p := range app.Spec.Processes {
		if p.Name == releaseProcess || p.Replicas == nil {
			continue
		}
		n += *p.Replicas
		web = web || p.Name == "web"
	}
	if !web {
		n++
	}
	return n
}

// releaseProcess is the Procfile's release phase (release.ReleaseProcess).
const releaseProcess = "release"
