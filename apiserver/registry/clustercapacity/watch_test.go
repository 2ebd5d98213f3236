package clustercapacity

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/utils/ptr"

	"bex.co/bex/apis/scheduling"
)

// fleet is a Source whose clusters the test sets; each set moves its
// version and tells the notified.
type fleet struct {
	mu       sync.Mutex
	version  uint64
	clusters map[string]scheduling.ClusterCapacity
	notified []func()
}

func (f *fleet) Capacities(context.Context) ([]scheduling.ClusterCapacity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []scheduling.ClusterCapacity
	for _, name := range slices.Sorted(maps.Keys(f.clusters)) {
		c := f.clusters[name]
		out = append(out, *c.DeepCopy())
	}
	return out, nil
}

func (f *fleet) Version() (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version, true
}

func (f *fleet) Notify(_ context.Context, changed func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notified = append(f.notified, changed)
}

// set makes cluster name's region region ("" removes the cluster).
func (f *fleet) set(name, region string) {
	f.mu.Lock()
	if region == "" {
		delete(f.clusters, name)
	} else {
		c := scheduling.ClusterCapacity{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"region": region}}}
		c.Status.Region = region
		f.clusters[name] = c
	}
	f.version++
	fns := f.notified
	f.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// setRegion sets a cluster's region and has r compute the capacities again.
func setRegion(t *testing.T, f *fleet, r *REST, name, region string) {
	t.Helper()
	f.set(name, region)
	if err := r.refresh(context.Background(), false); err != nil {
		t.Fatal(err)
	}
}

func newFleet(t *testing.T, clusters map[string]string) (*fleet, *REST) {
	t.Helper()
	f := &fleet{clusters: map[string]scheduling.ClusterCapacity{}}
	for name, region := range clusters {
		f.set(name, region)
	}
	r, err := NewREST(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, r
}

// next returns the watch's next event as "TYPE name region rv", or fails
// after a deadline.
func next(t *testing.T, w watch.Interface) string {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			return "closed"
		}
		c := e.Object.(*scheduling.ClusterCapacity)
		if e.Type == watch.Bookmark {
			return fmt.Sprintf("%s %s", e.Type, c.Annotations[metav1.InitialEventsAnnotationKey])
		}
		return fmt.Sprintf("%s %s %s", e.Type, c.Name, c.Status.Region)
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
		return ""
	}
}

func list(t *testing.T, r *REST, o *metainternalversion.ListOptions) *scheduling.ClusterCapacityList {
	t.Helper()
	obj, err := r.List(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*scheduling.ClusterCapacityList)
}

// TestWatchFollowsTheSource: a list and a watch from its resourceVersion
// see each cluster's change once, with growing resourceVersions; an
// object's resourceVersion is that of its last change.
func TestWatchFollowsTheSource(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, r := newFleet(t, map[string]string{"alpha": "eu", "beta": "us"})
	l := list(t, r, nil)
	if len(l.Items) != 2 || l.ResourceVersion != l.Items[1].ResourceVersion {
		t.Fatalf("list: %d items at %s, beta at %s", len(l.Items), l.ResourceVersion, l.Items[1].ResourceVersion)
	}
	w, err := r.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	setRegion(t, f, r, "alpha", "ap")
	setRegion(t, f, r, "gamma", "eu")
	setRegion(t, f, r, "beta", "")
	setRegion(t, f, r, "alpha", "ap") // no change: no event
	setRegion(t, f, r, "gamma", "us")
	var got []string
	last := l.ResourceVersion
	for range 4 {
		got = append(got, next(t, w))
	}
	want := []string{"MODIFIED alpha ap", "ADDED gamma eu", "DELETED beta us", "MODIFIED gamma us"}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
	l2 := list(t, r, nil)
	if a, b := mustRV(t, last), mustRV(t, l2.ResourceVersion); b != a+4 {
		t.Errorf("list resourceVersion %d after 4 changes from %d", b, a)
	}
	c, err := r.Get(ctx, "alpha", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rv := c.(*scheduling.ClusterCapacity).ResourceVersion; mustRV(t, rv) != mustRV(t, last)+1 {
		t.Errorf("alpha's resourceVersion %s, want the one of its change", rv)
	}
	if _, err := r.Get(ctx, "beta", nil); !apierrors.IsNotFound(err) {
		t.Errorf("get beta once gone: %v", err)
	}

	// Run computes again when the source tells of a change: the watch
	// sees it with no read.
	go r.Run(ctx)
	for {
		f.mu.Lock()
		n := len(f.notified)
		f.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	f.set("alpha", "eu")
	if got := next(t, w); got != "MODIFIED alpha eu" {
		t.Errorf("after a change told: %s", got)
	}
}

func mustRV(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWatchStarts: where a watch starts from each resourceVersion.
func TestWatchStarts(t *testing.T) {
	ctx := context.Background()
	f, r := newFleet(t, map[string]string{"alpha": "eu", "beta": "us"})
	r.history = 2
	l := list(t, r, nil)
	rv := mustRV(t, l.ResourceVersion)

	// "" and "0": the state now, as ADDED events.
	for _, from := range []string{"", "0"} {
		w, err := r.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: from})
		if err != nil {
			t.Fatal(err)
		}
		if a, b := next(t, w), next(t, w); a != "ADDED alpha eu" || b != "ADDED beta us" {
			t.Errorf("from %q: %s, %s", from, a, b)
		}
		w.Stop()
	}
	// sendInitialEvents with bookmarks, as client-go's watch-list asks.
	w, err := r.Watch(ctx, &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{next(t, w), next(t, w), next(t, w)}; !slices.Equal(got, []string{"ADDED alpha eu", "ADDED beta us", "BOOKMARK true"}) {
		t.Errorf("watch-list: %q", got)
	}
	w.Stop()

	// From now on, without the initial events.
	w, err = r.Watch(ctx, &metainternalversion.ListOptions{SendInitialEvents: ptr.To(false), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	setRegion(t, f, r, "beta", "ap")
	if got := next(t, w); got != "MODIFIED beta ap" {
		t.Errorf("from now on: %s", got)
	}
	w.Stop()
	setRegion(t, f, r, "beta", "us")
	rv += 2

	// Beyond the newest: too large.
	if _, err := r.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: strconv.FormatUint(rv+1, 10)}); !storage.IsTooLargeResourceVersion(err) {
		t.Errorf("watch from a future resourceVersion: %v", err)
	}
	// Four changes with a history of two: a watch from the list's
	// resourceVersion is expired; one from two changes back replays both.
	for _, region := range []string{"a", "b", "c", "d"} {
		setRegion(t, f, r, "alpha", region)
	}
	_, err = r.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: l.ResourceVersion})
	if !apierrors.IsResourceExpired(err) || apierrors.ReasonForError(err) != metav1.StatusReasonExpired {
		t.Fatalf("watch from an expired resourceVersion: want 410 Expired, got %v", err)
	}
	w, err = r.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: strconv.FormatUint(rv+2, 10)})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := next(t, w), next(t, w); a != "MODIFIED alpha c" || b != "MODIFIED alpha d" {
		t.Errorf("replay: %s, %s", a, b)
	}
	w.Stop()
	// A list at an exact old resourceVersion is expired too.
	_, err = r.List(ctx, &metainternalversion.ListOptions{ResourceVersion: l.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("list at an old exact resourceVersion: %v", err)
	}
}

// TestWatchSelectors: a cluster that leaves a selector is DELETED for its
// watchers, one that enters it ADDED.
func TestWatchSelectors(t *testing.T) {
	ctx := context.Background()
	f, r := newFleet(t, map[string]string{"alpha": "eu", "beta": "eu"})
	byName, err := fields.ParseSelector("metadata.name=alpha")
	if err != nil {
		t.Fatal(err)
	}
	named, err := r.Watch(ctx, &metainternalversion.ListOptions{FieldSelector: byName})
	if err != nil {
		t.Fatal(err)
	}
	defer named.Stop()
	if got := next(t, named); got != "ADDED alpha eu" {
		t.Fatalf("named: %s", got)
	}
	l := list(t, r, nil)
	sel, err := labels.Parse("region=eu")
	if err != nil {
		t.Fatal(err)
	}
	eu, err := r.Watch(ctx, &metainternalversion.ListOptions{LabelSelector: sel, ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer eu.Stop()
	setRegion(t, f, r, "beta", "us")
	setRegion(t, f, r, "beta", "eu")
	setRegion(t, f, r, "alpha", "us")
	if got := []string{next(t, eu), next(t, eu), next(t, eu)}; !slices.Equal(got, []string{"DELETED beta eu", "ADDED beta eu", "DELETED alpha eu"}) {
		t.Errorf("region=eu: %q", got)
	}
	if got := next(t, named); got != "MODIFIED alpha us" {
		t.Errorf("named: %s", got)
	}
}

// TestSlowWatcherIsCutOff: a watcher that falls behind by more than its
// buffer gets what fit, then its watch ends; the storage holds no more.
// The events the watch has taken from its queue but not yet delivered
// count too: however late its goroutine runs, no more than the buffer's
// worth is held for the watcher.
func TestSlowWatcherIsCutOff(t *testing.T) {
	ctx := context.Background()
	f, r := newFleet(t, map[string]string{"alpha": "eu"})
	r.watchBuffer = 3
	l := list(t, r, nil)
	w, err := r.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		setRegion(t, f, r, "alpha", strconv.Itoa(i))
	}
	n := 0
	for e := next(t, w); e != "closed"; e = next(t, w) {
		n++
	}
	if n != 3 {
		t.Errorf("a watcher with a buffer of 3 got %d of 10 events before its watch ended, want 3", n)
	}
	r.mu.Lock()
	left := len(r.watchers)
	r.mu.Unlock()
	if left != 0 {
		t.Errorf("%d watchers left", left)
	}
}

// TestSameComparesEveryField: same sees a change of each field of a
// ClusterCapacity's status and of its pools; a field added to the API
// fails here until same compares it.
func TestSameComparesEveryField(t *testing.T) {
	if n := reflect.TypeFor[scheduling.ClusterCapacityStatus]().NumField(); n != 16 {
		t.Errorf("ClusterCapacityStatus has %d fields, same compares 16", n)
	}
	if n := reflect.TypeFor[scheduling.PoolCapacity]().NumField(); n != 6 {
		t.Errorf("PoolCapacity has %d fields, same compares 6", n)
	}
	base := func() *scheduling.ClusterCapacity {
		c := &scheduling.ClusterCapacity{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"r": "eu"}}}
		c.Status.Pools = []scheduling.PoolCapacity{{Name: "workers"}}
		return c
	}
	now := metav1.Now()
	for name, change := range map[string]func(*scheduling.ClusterCapacity){
		"labels":          func(c *scheduling.ClusterCapacity) { c.Labels["r"] = "us" },
		"source":          func(c *scheduling.ClusterCapacity) { c.Status.Source = "Static" },
		"namespace":       func(c *scheduling.ClusterCapacity) { c.Status.ClusterNamespace = "x" },
		"region":          func(c *scheduling.ClusterCapacity) { c.Status.Region = "x" },
		"plans":           func(c *scheduling.ClusterCapacity) { c.Status.Plans = []string{"pro"} },
		"versions":        func(c *scheduling.ClusterCapacity) { c.Status.ControlPlaneVersions = []string{"1.37.2"} },
		"midUpgrade":      func(c *scheduling.ClusterCapacity) { c.Status.MidUpgrade = true },
		"healthy":         func(c *scheduling.ClusterCapacity) { c.Status.Healthy = true },
		"cordoned":        func(c *scheduling.ClusterCapacity) { c.Status.Cordoned = true },
		"deleting":        func(c *scheduling.ClusterCapacity) { c.Status.Deleting = true },
		"standby":         func(c *scheduling.ClusterCapacity) { c.Status.Standby = true },
		"accepts":         func(c *scheduling.ClusterCapacity) { c.Status.AcceptsPlacements = true },
		"reason":          func(c *scheduling.ClusterCapacity) { c.Status.Reason = "x" },
		"message":         func(c *scheduling.ClusterCapacity) { c.Status.Message = "x" },
		"allocatable":     func(c *scheduling.ClusterCapacity) { c.Status.Allocatable.CPU = resource.MustParse("1") },
		"requested":       func(c *scheduling.ClusterCapacity) { c.Status.Requested.Pods = 1 },
		"pools":           func(c *scheduling.ClusterCapacity) { c.Status.Pools = nil },
		"pool name":       func(c *scheduling.ClusterCapacity) { c.Status.Pools[0].Name = "x" },
		"pool nodes":      func(c *scheduling.ClusterCapacity) { c.Status.Pools[0].Nodes = 1 },
		"pool ready":      func(c *scheduling.ClusterCapacity) { c.Status.Pools[0].ReadyNodes = 1 },
		"pool not ready":  func(c *scheduling.ClusterCapacity) { c.Status.Pools[0].NotReadySince = &now },
		"pool allocation": func(c *scheduling.ClusterCapacity) { c.Status.Pools[0].Allocatable.Memory = resource.MustParse("1Gi") },
		"pool requested":  func(c *scheduling.ClusterCapacity) { c.Status.Pools[0].Requested.CPU = resource.MustParse("1") },
	} {
		a, b := base(), base()
		change(b)
		if same(a, b) {
			t.Errorf("%s: a change not seen", name)
		}
	}
	// A quantity written otherwise is the same.
	a, b := base(), base()
	a.Status.Allocatable.CPU, b.Status.Allocatable.CPU = resource.MustParse("1"), resource.MustParse("1000m")
	if !same(a, b) {
		t.Error("1 and 1000m CPU differ")
	}
}
