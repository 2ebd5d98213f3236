package store_test

import (
	"context"
	"testing"

	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newStore opens a store on a fresh database that is dropped after t.
func newStore(t *testing.T) *store.Store {
	t.Helper()
	s, _ := newStoreURL(t)
	return s
}

// newStoreURL is newStore that also returns the database's URL.
func newStoreURL(t testing.TB) (*store.Store, string) {
	t.Helper()
	dbURL := pgtest.NewDatabase(t)
	s, err := store.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s, dbURL
}

// newTenant creates a tenant or fails t.
func newTenant(t *testing.T, s *store.Store, name string) store.Tenant {
	t.Helper()
	tenant, err := s.CreateTenant(context.Background(), name)
	if err != nil {
		t.Fatalf("CreateTenant(%q): %v", name, err)
	}
	return tenant
}
