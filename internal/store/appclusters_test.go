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

// TestServingClustersSince: every write that changes where an app runs
// makes a new version, one that changes nothing does not, and a read at
// the current version reads no apps.
func TestServingClustersSince(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, conn := newStoreConn(t)
	newTenant(t, s, "acme")
	newTenant(t, s, "other")

	var version int64
	// read asks for the apps since the last version and says whether they
	// were read, checking them against want when they were.
	read := func(step string, want map[string]string) bool {
		t.Helper()
		got, v, err := s.ServingClustersSince(ctx, version)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got == nil {
			if v != version {
				t.Fatalf("%s: no apps read but the version went from %d to %d", step, version, v)
			}
			return false
		}
		if v == version {
			t.Fatalf("%s: apps read at the same version %d", step, v)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", step, got, want)
		}
		version = v
		return true
	}
	set := func(tenant, app, cluster string) {
		t.Helper()
		if err := s.SetServingCluster(ctx, tenant, app, cluster); err != nil {
			t.Fatal(err)
		}
	}

	if !read("first read", map[string]string{}) {
		t.Fatal("the first read (since 0) read no apps")
	}
	if read("nothing written", nil) {
		t.Fatal("read the apps again with nothing written")
	}
	set("acme", "web", "a")
	set("other", "web", "a")
	if !read("after two apps placed", map[string]string{"acme/web": "a", "other/web": "a"}) {
		t.Fatal("two apps placed: not read")
	}
	set("acme", "web", "a") // deployed again where it runs
	if read("the same placement again", nil) {
		t.Fatal("a write that changed nothing made a new version")
	}
	set("acme", "web", "b")
	if !read("after a move", map[string]string{"acme/web": "b", "other/web": "a"}) {
		t.Fatal("a move: not read")
	}
	if err := s.ClearServingCluster(ctx, "acme", "gone"); err != nil {
		t.Fatal(err)
	}
	if read("clearing an app that runs nowhere", nil) {
		t.Fatal("clearing nothing made a new version")
	}
	if err := s.ClearServingCluster(ctx, "acme", "web"); err != nil {
		t.Fatal(err)
	}
	if !read("after a clear", map[string]string{"other/web": "a"}) {
		t.Fatal("a cleared app: not read")
	}
	if _, err := conn.Exec(ctx, "DELETE FROM tenants WHERE name = 'other'"); err != nil {
		t.Fatal(err)
	}
	if !read("after the tenant's deletion", map[string]string{}) {
		t.Fatal("the apps of a deleted tenant: not read")
	}
}

// BenchmarkServingClusters10000Apps: what the edge of a cluster install
// reads each second to follow where 10,000 apps of 1,000 tenants run,
// every app against the version alone while nothing changed.
func BenchmarkServingClusters10000Apps(b *testing.B) {
	s, conn := newStoreConn(b)
	ctx := b.Context()
	if _, err := conn.Exec(ctx, "INSERT INTO tenants (name) SELECT 'tenant' || i FROM generate_series(0, 999) i"); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO app_clusters (tenant_id, app, cluster) "+
		"SELECT t.id, 'app' || i, 'cluster' || (i % 100) FROM generate_series(0, 9999) i JOIN tenants t ON t.name = 'tenant' || (i % 1000)"); err != nil {
		b.Fatal(err)
	}
	b.Run("every-app-as-before", func(b *testing.B) {
		for b.Loop() {
			m, err := s.ServingClusters(ctx)
			if err != nil || len(m) != 10000 {
				b.Fatalf("%d apps, %v", len(m), err)
			}
		}
	})
	_, version, err := s.ServingClustersSince(ctx, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("unchanged-version", func(b *testing.B) {
		for b.Loop() {
			if m, _, err := s.ServingClustersSince(ctx, version); err != nil || m != nil {
				b.Fatalf("%d apps read, %v", len(m), err)
			}
		}
	})
}
