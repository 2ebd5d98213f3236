package store_test

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"bex.co/bex/internal/store"
)

func TestServingClusters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	newTenant(t, s, "acme")
	newTenant(t, s, "other")

	for _, c := range []struct{ tenant, app, cluster string }{
		{"acme", "web", "local"},
		{"other", "web", "alpha"},
		{"acme", "web", "beta"}, // a move
		{"acme", "api", "beta"},
	} {
		if err := s.SetServingCluster(ctx, c.tenant, c.app, c.cluster); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ServingClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"acme/web": "beta", "acme/api": "beta", "other/web": "alpha"}
	if !maps.Equal(got, want) {
		t.Fatalf("serving clusters %v, want %v", got, want)
	}
	for cluster, want := range map[string][]string{"beta": {"acme/api", "acme/web"}, "alpha": {"other/web"}, "local": nil} {
		got, err := s.AppsServedBy(ctx, cluster)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("apps served by %s: %v, want %v", cluster, got, want)
		}
	}

	for _, c := range []struct {
		tenant, app, want string
		ok                bool
	}{{"acme", "web", "beta", true}, {"other", "web", "alpha", true}, {"other", "api", "", false}, {"nobody", "web", "", false}} {
		got, ok, err := s.ServingCluster(ctx, c.tenant, c.app)
		if err != nil || got != c.want || ok != c.ok {
			t.Errorf("serving cluster of %s/%s: %q %v %v, want %q %v", c.tenant, c.app, got, ok, err, c.want, c.ok)
		}
	}

	if err := s.ClearServingCluster(ctx, "acme", "web"); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.ServingCluster(ctx, "acme", "web"); err != nil || ok {
		t.Errorf("serving cluster of a cleared app: %q %v %v", got, ok, err)
	}
	if err := s.ClearServingCluster(ctx, "acme", "gone"); err != nil {
		t.Fatalf("clearing an app with no cluster: %v", err)
	}
	got, err = s.ServingClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"acme/api": "beta", "other/web": "alpha"}; !maps.Equal(got, want) {
		t.Fatalf("after clearing acme/web: %v, want %v", got, want)
	}

	if err := s.SetServingCluster(ctx, "nobody", "web", "local"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown tenant: %v, want ErrNotFound", err)
	}
	if err := s.SetServingCluster(ctx, "acme", "web", ""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an empty cluster: %v, want ErrInvalid", err)
	}
}

func TestLeftovers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	newTenant(t, s, "acme")

	web := store.Leftover{Tenant: "acme", App: "web", Cluster: "alpha"}
	api := store.Leftover{Tenant: "acme", App: "api", Cluster: "beta"}
	for _, l := range []store.Leftover{web, api, web} {
		if err := s.AddLeftover(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.Leftover{web, api}; !slices.Equal(got, want) {
		t.Fatalf("leftovers %v, want %v (oldest first, once each)", got, want)
	}
	if err := s.ClearLeftover(ctx, web); err != nil {
		t.Fatal(err)
	}
	if err := s.ClearLeftover(ctx, web); err != nil {
		t.Fatalf("clearing a missing leftover: %v", err)
	}
	got, err = s.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.Leftover{api}; !slices.Equal(got, want) {
		t.Fatalf("after clearing %v: %v, want %v", web, got, want)
	}
	if err := s.AddLeftover(ctx, store.Leftover{Tenant: "nobody", App: "web", Cluster: "alpha"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown tenant: %v, want ErrNotFound", err)
	}
	if err := s.AddLeftover(ctx, store.Leftover{Tenant: "acme", App: "web"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an empty cluster: %v, want ErrInvalid", err)
	}
}
