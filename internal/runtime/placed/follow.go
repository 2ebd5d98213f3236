package placed

import (
	"context"
	"strings"
	"sync"
	"time"
)

// DefaultFollowInterval is how often the edge of a cluster install reads
// where apps run (Follow).
const DefaultFollowInterval = time.Second

// Follow keeps the driver's copy of a shared Ledger for a process that
// routes but does not deploy (the edge of a cluster install): every
// interval, until ctx ends, it reads the Ledger, connects to the clusters
// that serve apps (their routing tables fill in the background), and
// switches each app the Ledger moved to another cluster once that
// cluster's routing table lists the app's web instances, or the old
// cluster's lists none, or RoutedTimeout after it first saw the move. So
// the edge, like the process that moved the app (Deploy), does not switch
// to a cluster that would answer with no upstream while the old one still
// serves for Options.DrainDelay. An app new to the Ledger is routed at
// once; one gone from it is forgotten. A VersionedLedger is read whole
// only when it changed: a round reads one version otherwise.
func (d *Driver) Follow(ctx context.Context, interval time.Duration) {
	f := &follower{d: d, seen: map[string]time.Time{}}
	for {
		f.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// follower is Follow's state between its rounds.
type follower struct {
	d *Driver
	// seen is when each pending move was first read.
	seen map[string]time.Time
	// connecting holds the clusters being connected, broken those whose
	// last connection failed (told once).
	connecting, broken sync.Map
	failing            bool
	// ledger is the last read of a VersionedLedger, at version.
	ledger  map[string]string
	version int64
}

// read returns every app's cluster, from the last read when the Ledger
// tells that nothing changed since.
func (f *follower) read(ctx context.Context) (map[string]string, error) {
	vl, ok := f.d.opts.Ledger.(VersionedLedger)
	if !ok {
		return f.d.opts.Ledger.ServingClusters(ctx)
	}
	m, v, err := vl.ServingClustersSince(ctx, f.version)
	if err != nil {
		return nil, err
	}
	if m != nil {
		f.ledger, f.version = m, v
	}
	return f.ledger, nil
}

func (f *follower) round(ctx context.Context) {
	d := f.d
	ledger, err := f.read(ctx)
	if err != nil {
		if ctx.Err() == nil && !f.failing {
			d.opts.Log.Error(err, "Reading where apps run; the edge routes as before until it can")
		}
		f.failing = true
		return
	}
	if f.failing {
		d.opts.Log.Info("Reading where apps run again")
		f.failing = false
	}
	clusters := map[string]bool{}
	now := time.Now()
	for key, to := range ledger {
		clusters[to] = true
		cur, ok := d.serving.Load(key)
		if ok && cur.(string) == to {
			delete(f.seen, key)
			continue
		}
		tenant, app, _ := strings.Cut(key, "/")
		first, pending := f.seen[key]
		if !pending {
			first = now
		}
		if !ok || f.routed(to, tenant, app) || !f.routed(cur.(string), tenant, app) || now.Sub(first) >= d.opts.RoutedTimeout {
			d.serving.Store(key, to)
			delete(f.seen, key)
			continue
		}
		f.seen[key] = first
	}
	d.serving.Range(func(k, _ any) bool {
		if _, ok := ledger[k.(string)]; !ok {
			d.serving.Delete(k)
			delete(f.seen, k.(string))
		}
		return true
	})
	// Each serving cluster's driver is asked for, which connects it the
	// first time and drops it once its Cluster is gone.
	for c := range clusters {
		if _, busy := f.connecting.LoadOrStore(c, true); busy {
			continue
		}
		go func() {
			defer f.connecting.Delete(c)
			_, err := d.opts.Clusters.Driver(ctx, c)
			switch _, was := f.broken.Load(c); {
			case err != nil && ctx.Err() == nil && !was:
				f.broken.Store(c, true)
				d.opts.Log.Error(err, "Connecting to a cluster that serves apps; its apps are routed as before", "cluster", c)
			case err == nil && was:
				f.broken.Delete(c)
				d.opts.Log.Info("Connected to a cluster that serves apps again", "cluster", c)
			}
		}()
	}
}

// routed reports whether cluster's routing table lists web instances of
// the app.
func (f *follower) routed(cluster, tenant, app string) bool {
	apps := f.d.opts.Clusters.Apps(cluster)
	return apps != nil && len(apps.Upstreams(tenant, app)) > 0
}
