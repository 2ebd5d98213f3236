package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"bex.co/bex/internal/mvp"
)

const (
	// IdentityLeaseLabel selects the identity leases of kube-apiservers in
	// kube-system: apiserver.kubernetes.io/identity=kube-apiserver.
	IdentityLeaseLabel = mvp.IdentityLeaseSelector
	// DefaultStaleLeaseAfter is how long an identity lease must go
	// unrenewed to be stale. A running kube-apiserver renews its lease
	// every 10 s; a minute is six missed renewals.
	DefaultStaleLeaseAfter = time.Minute
)

// Lease is one kube-apiserver identity lease and what the verifier made of
// it.
type Lease struct {
	Name string `json:"name"`
	// Hostname is the server's hostname (label kubernetes.io/hostname).
	Hostname string `json:"hostname,omitempty"`
	// Holder is the lease's holderIdentity: the lease name, "_", and an ID
	// the server picks at each start.
	Holder    string    `json:"holder,omitempty"`
	RenewTime time.Time `json:"renewTime"`
	// Unrenewed is how long before the newest identity lease's renewal
	// this one was last renewed.
	Unrenewed metav1.Duration `json:"unrenewed"`
	// Target is the name of the target whose hostname the lease carries.
	Target string `json:"target,omitempty"`
	// Stale: the lease's server is gone (see StaleLeases).
	Stale bool `json:"stale"`
	// Removed: the verifier deleted the stale lease.
	Removed bool `json:"removed,omitempty"`
	// Error says why a stale lease could not be removed.
	Error string `json:"error,omitempty"`
}

// finding is what a stale lease left in place means.
func (l Lease) finding() string {
	msg := fmt.Sprintf("identity lease kube-system/%s of apiserver %s was last renewed %s before the newest one: its server is gone, and its peers answer 503 for what only it served until the lease is removed (run the verifier with stale-lease removal, or kubectl -n kube-system delete lease %s)",
		l.Name, orUnknown(l.Hostname), l.Unrenewed.Duration.Round(time.Second), l.Name)
	if l.Error != "" {
		msg += "; removing it failed: " + l.Error
	}
	return msg
}

func orUnknown(s string) string {
	if s == "" {
		return "(hostname unknown)"
	}
	return s
}

// StaleLeases lists the kube-apiserver identity leases in kube-system,
// through the first target that answers, and classifies them (classifyLeases
// states the rule). With remove, it deletes each stale lease, on condition
// that it was not renewed since it was read (a server that came back with
// the same hostname keeps its lease).
func StaleLeases(ctx context.Context, targets []Target, after time.Duration, remove bool) ([]Lease, error) {
	if after <= 0 {
		after = DefaultStaleLeaseAfter
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	var errs []error
	for _, t := range targets {
		cs, err := kubernetes.NewForConfig(t.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.Name, err))
			continue
		}
		list, err := cs.CoordinationV1().Leases(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: IdentityLeaseLabel})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.Name, err))
			continue
		}
		out := classifyLeases(list.Items, names, after)
		if !remove {
			return out, nil
		}
		for i, l := range out {
			if !l.Stale {
				continue
			}
			lease := list.Items[slices.IndexFunc(list.Items, func(x coordinationv1.Lease) bool { return x.Name == l.Name })]
			err := cs.CoordinationV1().Leases(metav1.NamespaceSystem).Delete(ctx, l.Name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion},
			})
			switch {
			case err == nil, apierrors.IsNotFound(err):
				out[i].Removed = true
			default:
				out[i].Error = err.Error()
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("listing the apiservers' identity leases: %w", errors.Join(errs...))
}

// classifyLeases applies the stale-lease rule. A lease is stale when
//
//   - its hostname (label kubernetes.io/hostname) is not the name of a
//     target, and
//   - its renewTime is more than after older than the newest renewTime
//     among the identity leases.
//
// Age is measured against the newest renewal, that is the servers' clock,
// not the verifier's. A running apiserver renews every 10 s, so only a
// server that stopped renewing can be stale; the target check keeps a
// target's lease even when its renewals lag. Kubernetes' own garbage
// collection waits for leaseDurationSeconds (3600 s) and runs hourly,
// which is why a dead peer's 503s last up to about an hour without this.
func classifyLeases(leases []coordinationv1.Lease, targets []string, after time.Duration) []Lease {
	var newest time.Time
	for _, l := range leases {
		if r := renewed(l); r.After(newest) {
			newest = r
		}
	}
	out := make([]Lease, 0, len(leases))
	for _, l := range leases {
		x := Lease{Name: l.Name, Hostname: l.Labels[corev1.LabelHostname], RenewTime: renewed(l)}
		if l.Spec.HolderIdentity != nil {
			x.Holder = *l.Spec.HolderIdentity
		}
		x.Unrenewed = metav1.Duration{Duration: newest.Sub(x.RenewTime)}
		if x.Hostname != "" && slices.Contains(targets, x.Hostname) {
			x.Target = x.Hostname
		}
		x.Stale = x.Target == "" && x.Unrenewed.Duration > after
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b Lease) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// renewed returns when a lease was last renewed: renewTime, else
// acquireTime, else its creation.
func renewed(l coordinationv1.Lease) time.Time {
	switch {
	case l.Spec.RenewTime != nil:
		return l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		return l.Spec.AcquireTime.Time
	}
	return l.CreationTimestamp.Time
}
