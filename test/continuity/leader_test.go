package continuity_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaders runs candidates for one Lease through the load balancer, with
// client-go's leader election and the timings controller-runtime uses by
// default, and keeps when each led: two leaders at once would show as
// overlapping terms.
type leaders struct {
	mu      sync.Mutex
	terms   []term
	cancels map[string]context.CancelFunc
	start   func(id string)
}

// term is one candidate's time as leader; End is zero while it leads.
type term struct {
	Candidate  string    `json:"candidate"`
	Start, End time.Time `json:"-"`
	StartAt    string    `json:"start"`
	EndAt      string    `json:"end,omitempty"`
}

// run starts n candidates until ctx ends.
func (l *leaders) run(ctx context.Context, cfg *rest.Config, n int) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	l.cancels = map[string]context.CancelFunc{}
	l.start = func(id string) {
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: "bex-continuity-leader"},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
			ReleaseOnCancel: true, Name: id,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { l.started(id) },
				OnStoppedLeading: func() { l.stopped(id) },
			},
		})
		if err != nil {
			panic(err) // fixed durations and a lock: NewLeaderElector refuses neither
		}
		cctx, cancel := context.WithCancel(ctx)
		l.mu.Lock()
		l.cancels[id] = cancel
		l.mu.Unlock()
		go func() {
			// A candidate that lost its term stands again, as a
			// restarted controller manager would.
			for cctx.Err() == nil {
				le.Run(cctx)
			}
		}()
	}
	for i := range n {
		l.start(fmt.Sprintf("candidate-%d", i+1))
	}
	return nil
}

// handOver makes the leader step down (it releases the Lease, as a
// controller manager that stops does) and stand again; it returns the
// leader's name, or "" when none leads.
func (l *leaders) handOver() string {
	l.mu.Lock()
	leader := ""
	for i := len(l.terms) - 1; i >= 0; i-- {
		if l.terms[i].End.IsZero() {
			leader = l.terms[i].Candidate
			break
		}
	}
	cancel := l.cancels[leader]
	l.mu.Unlock()
	if leader == "" {
		return ""
	}
	cancel()
	time.Sleep(time.Second)
	l.start(leader)
	return leader
}

func (l *leaders) started(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.terms = append(l.terms, term{Candidate: id, Start: time.Now()})
}

func (l *leaders) stopped(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.terms) - 1; i >= 0; i-- {
		if l.terms[i].Candidate == id && l.terms[i].End.IsZero() {
			l.terms[i].End = time.Now()
			return
		}
	}
}

// report returns the terms and the overlaps: pairs of terms of different
// candidates that were open at the same time.
func (l *leaders) report() ([]term, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var overlaps []string
	for i, a := range l.terms {
		for _, b := range l.terms[i+1:] {
			aEnd, bEnd := a.End, b.End
			if aEnd.IsZero() {
				aEnd = time.Now()
			}
			if bEnd.IsZero() {
				bEnd = time.Now()
			}
			if a.Candidate != b.Candidate && a.Start.Before(bEnd) && b.Start.Before(aEnd) {
				overlaps = append(overlaps, fmt.Sprintf("%s and %s both led at %s", a.Candidate, b.Candidate, later(a.Start, b.Start).Format("15:04:05.000")))
			}
		}
	}
	out := make([]term, len(l.terms))
	for i, t := range l.terms {
		t.StartAt = t.Start.Format(time.RFC3339Nano)
		if !t.End.IsZero() {
			t.EndAt = t.End.Format(time.RFC3339Nano)
		}
		out[i] = t
	}
	return out, overlaps
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
