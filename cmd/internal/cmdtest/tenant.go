package cmdtest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/store"
	"bex.co/bex/web/api"
)

// Tenant creates a tenant as the platform has one (its row, its labelled
// namespace) and an API token of it, and returns the token and the
// tenant's ID.
func Tenant(ctx context.Context, t testing.TB, st *store.Store, kube client.Client, name string) (token, id string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.TenantLabel: name}}}
	if err := kube.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	tn, err := st.CreateTenant(ctx, name)
	if err != nil {
		t.Fatalf("creating tenant %s: %v", name, err)
	}
	secret, _, err := st.CreateToken(ctx, tn.ID, "", "test")
	if err != nil {
		t.Fatalf("creating a token: %v", err)
	}
	return secret, tn.ID
}
