package mvp

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// Identity leases: each kube-apiserver holds one in kube-system, named
// apiserver-<hash of its hostname>, with these labels. Peers of the Mixed
// Version Proxy find each other through them.
const (
	// IdentityLeaseLabel is the label key and value every identity lease
	// of a kube-apiserver carries.
	IdentityLeaseLabel = "apiserver.kubernetes.io/identity"
	// IdentityLeaseValue is IdentityLeaseLabel's value for kube-apiserver.
	IdentityLeaseValue = "kube-apiserver"
	// IdentityLeaseSelector selects them.
	IdentityLeaseSelector = IdentityLeaseLabel + "=" + IdentityLeaseValue
)

// RemoveIdentityLease deletes the identity lease of the kube-apiserver
// whose hostname is hostname (label kubernetes.io/hostname), through cs,
// which must reach a running apiserver other than that one. Call it once
// that server's process is known to be dead: its peers forget it at once,
// and answer 404 for what only it served instead of the 503 they answer
// while its lease stays (up to an hour, until Kubernetes' own lease garbage
// collection).
//
// Each lease is deleted on condition of the UID and resourceVersion it was
// read with: a server that came back with the same hostname renews the
// lease, and keeps it. A conflict is read again and retried while the
// lease's holder (which a server picks anew at each start) is unchanged.
// It returns the names of the leases it deleted; none (and no error) when
// there was no lease of hostname, or its server came back.
func RemoveIdentityLease(ctx context.Context, cs kubernetes.Interface, hostname string) ([]string, error) {
	leases := cs.CoordinationV1().Leases(metav1.NamespaceSystem)
	sel := klabels.Set{IdentityLeaseLabel: IdentityLeaseValue, corev1.LabelHostname: hostname}.String()
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing the identity lease of apiserver %s: %w", hostname, err)
	}
	var removed []string
	for _, l := range list.Items {
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		for attempt := 0; ; attempt++ {
			err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion},
			})
			if err == nil {
				removed = append(removed, l.Name)
				break
			}
			if apierrors.IsNotFound(err) {
				break
			}
			if !apierrors.IsConflict(err) || attempt == 3 {
				return removed, fmt.Errorf("deleting the identity lease kube-system/%s of apiserver %s: %w", l.Name, hostname, err)
			}
			// Renewed since it was read: by its server's last request
			// in flight, or by a server that came back.
			again, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if err != nil {
				return removed, fmt.Errorf("reading the identity lease kube-system/%s of apiserver %s: %w", l.Name, hostname, err)
			}
			if again.UID != l.UID || again.Spec.HolderIdentity == nil || *again.Spec.HolderIdentity != holder {
				break // a new server holds it
			}
			l = *again
		}
	}
	return removed, nil
}
