package steptime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// maxSteps bounds a Timeline: work that times more distinct steps keeps
// the first ones.
const maxSteps = 32

// Step is one step's name and its time, summed over the times it ran.
type Step struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// Timeline collects steps in the order they first ran. It is safe for
// concurrent use.
type Timeline struct {
	mu    sync.Mutex
	steps []Step
}

type key struct{}

// New returns ctx carrying a new Timeline, and the Timeline.
func New(ctx context.Context) (context.Context, *Timeline) {
	t := &Timeline{}
	return context.WithValue(ctx, key{}, t), t
}

// From returns the Timeline of ctx, or nil.
func From(ctx context.Context) *Timeline {
	t, _ := ctx.Value(key{}).(*Timeline)
	return t
}

// Start times the step name of ctx's Timeline until the returned function
// is called; without a Timeline it does nothing.
func Start(ctx context.Context, name string) (stop func()) {
	t := From(ctx)
	if t == nil {
		return func() {}
	}
	begin := time.Now()
	return func() { t.Add(name, time.Since(begin)) }
}

// Add adds d to the step name.
func (t *Timeline) Add(name string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.steps {
		if t.steps[i].Name == name {
			t.steps[i].Seconds += d.Seconds()
			return
		}
	}
	if len(t.steps) < maxSteps {
		t.steps = append(t.steps, Step{Name: name, Seconds: d.Seconds()})
	}
}

// Steps returns a copy of the steps so far.
func (t *Timeline) Steps() []Step {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Step(nil), t.steps...)
}

// Format renders steps as "checkout 45ms, app build 1.40s, …".
func Format(steps []Step) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = s.Name + " " + Seconds(s.Seconds)
	}
	return strings.Join(parts, ", ")
}

// Seconds renders s as milliseconds below a second, else as seconds with
// two decimals.
func Seconds(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%dms", int(s*1000+0.5))
	}
	return fmt.Sprintf("%.2fs", s)
}
