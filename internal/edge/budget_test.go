package edge_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"bex.co/bex/internal/edge"
)

// TestCertificateBudget spends two budgets on one storage, as two edge
// replicas do: they share the count, a name is charged once, a spent
// budget says when it has room, and the window slides.
func TestCertificateBudget(t *testing.T) {
	ctx := context.Background()
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	a := &edge.CertificateBudget{Names: 3, Storage: storage, Now: clock}
	b := &edge.CertificateBudget{Names: 3, Storage: storage, Now: clock}

	spend := func(bu *edge.CertificateBudget, tenant, name string, want bool) time.Time {
		t.Helper()
		ok, until, err := bu.Spend(ctx, tenant, name)
		if err != nil {
			t.Fatal(err)
		}
		if ok != want {
			t.Fatalf("Spend(%s, %s) = %v, want %v", tenant, name, ok, want)
		}
		return until
	}
	start := clock()
	spend(a, "acme", "n1.wild.test", true)
	advance(10 * time.Minute)
	spend(b, "acme", "n2.wild.test", true)
	spend(a, "acme", "n2.wild.test", true) // charged already: free
	spend(b, "other", "n1.other.test", true)
	advance(10 * time.Minute)
	spend(a, "acme", "n3.wild.test", true)
	until := spend(b, "acme", "n4.wild.test", false)
	if want := start.Add(edge.BudgetWindow); !until.Equal(want) {
		t.Errorf("spent budget has room at %s, want %s (when the first charge leaves the window)", until, want)
	}
	// Names charged before stay free while the budget is spent, on both.
	spend(a, "acme", "n1.wild.test", true)
	spend(b, "acme", "n3.wild.test", true)
	spend(a, "acme", "n5.wild.test", false)
	// Another tenant's budget is its own.
	spend(a, "other", "n2.other.test", true)

	advance(edge.BudgetWindow - 20*time.Minute)
	spend(b, "acme", "n4.wild.test", true)
	spend(a, "acme", "n5.wild.test", false)
	// n1 left the window: it is a new name again, and the budget is spent.
	spend(a, "acme", "n1.wild.test", false)

	if _, _, err := (&edge.CertificateBudget{Storage: storage}).Spend(ctx, "acme", "n6.wild.test"); err == nil {
		t.Error("a budget of no names spent without an error")
	}
}
