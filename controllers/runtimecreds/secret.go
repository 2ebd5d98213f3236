package runtimecreds

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime/placed"
)

// tooBigError is a key refused because the Secret would pass
// corev1.MaxSecretSize.
type tooBigError struct {
	secret types.NamespacedName
	key    string
	size   int
}

func (e *tooBigError) Error() string {
	return fmt.Sprintf("runtime kubeconfig %q refused: Secret %s would hold %d bytes, over Kubernetes' %d per Secret; the cluster's processes keep no credentials there until clusters are removed",
		e.key, e.secret, e.size, corev1.MaxSecretSize)
}

// currentKey returns the Secret's key, nil when it or the Secret is
// missing.
func (r *Reconciler) currentKey(ctx context.Context, key string) ([]byte, error) {
	s := &corev1.Secret{}
	if err := r.Reader.Get(ctx, r.Secret, s); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading %s: %w", r.Secret, err)
	}
	return s.Data[key], nil
}

// writeKey sets the key of cluster to kubeconfig, or removes it when
// kubeconfig is nil, and drops the keys of Clusters that are gone (or out
// of FleetNamespace); it writes only when something changed. A Secret
// that would pass corev1.MaxSecretSize is a *tooBigError, and nothing is
// written.
func (r *Reconciler) writeKey(ctx context.Context, c types.NamespacedName, kubeconfig []byte) error {
	var list clusterv1.ClusterList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.FleetNamespace)); err != nil {
		return fmt.Errorf("listing clusters: %w", err)
	}
	live := map[string]bool{}
	for _, cl := range list.Items {
		if cl.DeletionTimestamp.IsZero() {
			live[placed.RuntimeKubeconfigKey(cl.Namespace, cl.Name)] = true
		}
	}
	key := placed.RuntimeKubeconfigKey(c.Namespace, c.Name)
	s := &corev1.Secret{}
	err := r.Reader.Get(ctx, r.Secret, s)
	if apierrors.IsNotFound(err) {
		if kubeconfig == nil {
			return nil
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Secret.Namespace, Name: r.Secret.Name,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "bex"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{key: kubeconfig},
		}
		if n := dataSize(s.Data); n > corev1.MaxSecretSize {
			return &tooBigError{secret: r.Secret, key: key, size: n}
		}
		if err := r.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("creating %s: %w", r.Secret, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", r.Secret, err)
	}
	data := maps.Clone(s.Data)
	if data == nil {
		data = map[string][]byte{}
	}
	for k := range data {
		if !live[k] {
			delete(data, k)
		}
	}
	if kubeconfig == nil {
		delete(data, key)
	} else {
		data[key] = kubeconfig
	}
	if maps.EqualFunc(data, s.Data, func(a, b []byte) bool { return string(a) == string(b) }) {
		return nil
	}
	if n := dataSize(data); n > corev1.MaxSecretSize && kubeconfig != nil && len(data[key]) > len(s.Data[key]) {
		return &tooBigError{secret: r.Secret, key: key, size: n}
	}
	s.Data = data
	if err := r.Client.Update(ctx, s); err != nil {
		return fmt.Errorf("writing %s: %w", r.Secret, err)
	}
	return nil
}

// dataSize is what the apiserver counts against corev1.MaxSecretSize: the
// values' bytes.
func dataSize(data map[string][]byte) int {
	n := 0
	for _, v := range data {
		n += len(v)
	}
	return n
}
