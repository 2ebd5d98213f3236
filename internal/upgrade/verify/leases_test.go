package verify

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClassifyLeases(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	lease := func(name, hostname string, renew *time.Time) coordinationv1.Lease {
		l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		if hostname != "" {
			l.Labels["kubernetes.io/hostname"] = hostname
		}
		if renew != nil {
			mt := metav1.NewMicroTime(*renew)
			l.Spec.RenewTime = &mt
		}
		return l
	}
	at := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	for _, tc := range []struct {
		name   string
		leases []coordinationv1.Lease
		want   map[string]bool // lease name → stale
	}{{
		name:   "fresh leases of targets and of a live server that is no target",
		leases: []coordinationv1.Lease{lease("a", "old-a", at(0)), lease("b", "old-b", at(9*time.Second)), lease("c", "other", at(10*time.Second))},
		want:   map[string]bool{"a": false, "b": false, "c": false},
	}, {
		name:   "a gone server's lease past the threshold",
		leases: []coordinationv1.Lease{lease("a", "old-a", at(0)), lease("c", "new", at(61*time.Second))},
		want:   map[string]bool{"a": false, "c": true},
	}, {
		name:   "exactly at the threshold is not stale",
		leases: []coordinationv1.Lease{lease("a", "old-a", at(0)), lease("c", "new", at(time.Minute))},
		want:   map[string]bool{"a": false, "c": false},
	}, {
		name:   "a target's lease is never stale, however late",
		leases: []coordinationv1.Lease{lease("a", "old-a", at(0)), lease("b", "old-b", at(time.Hour))},
		want:   map[string]bool{"a": false, "b": false},
	}, {
		name:   "no hostname label: age decides",
		leases: []coordinationv1.Lease{lease("a", "", at(0)), lease("c", "", at(2*time.Minute))},
		want:   map[string]bool{"a": false, "c": true},
	}, {
		name:   "never renewed: its creation counts",
		leases: []coordinationv1.Lease{lease("a", "old-a", at(0)), lease("c", "new", nil)},
		want:   map[string]bool{"a": false, "c": true},
	}, {
		name: "the verifier's clock does not matter: ages are relative to the newest renewal",
		// All renewed long ago by the verifier's clock, seconds apart by the servers'.
		leases: []coordinationv1.Lease{lease("a", "x", at(10*time.Hour)), lease("c", "y", at(10*time.Hour+5*time.Second))},
		want:   map[string]bool{"a": false, "c": false},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := classifyLeases(tc.leases, []string{"old-a", "old-b"}, time.Minute)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d leases, want %d", len(got), len(tc.want))
			}
			for _, l := range got {
				if l.Stale != tc.want[l.Name] {
					t.Errorf("lease %s (hostname %q, unrenewed %v): stale %v, want %v", l.Name, l.Hostname, l.Unrenewed.Duration, l.Stale, tc.want[l.Name])
				}
				if (l.Target != "") != (l.Hostname == "old-a" || l.Hostname == "old-b") {
					t.Errorf("lease %s: target %q", l.Name, l.Target)
				}
			}
		})
	}
}
