package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	appctrl "bex.co/bex/controllers/app"
	"bex.co/bex/test/bench"
)

// report is everything the bench measured.
type report struct {
	apps, tenants        int
	finalizer            bool
	planeBefore          planeSample
	platformReady        time.Duration
	seeded               time.Duration
	loadBefore           string
	listSmall, listLarge listTiming
	converge             convergeResult
	edge                 edgeResult
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func (r *report) print(out io.Writer) {
	fmt.Fprintf(out, "appsbench %s: %d apps over %d tenants, one Route and one release each; load average %s before, %s after\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), r.apps, r.tenants, r.loadBefore, bench.LoadAverage())
	fmt.Fprintf(out, "control plane and Postgres ready in %s; seeding took %s (%.0f apps/s); Apps seeded %s\n\n",
		r.platformReady.Round(time.Second), r.seeded.Round(time.Second), float64(r.apps)/r.seeded.Seconds(), finalizerWords(r.finalizer))

	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	c := r.converge
	fmt.Fprintln(tw, "figure\tvalue\t")
	fmt.Fprintf(tw, "App controller, cold start to all Ready\t%s\t\n", c.apps.Round(time.Millisecond))
	fmt.Fprintf(tw, "Route controller, cold start to all Ready\t%s\t\n", c.routes.Round(time.Millisecond))
	perApp := float64(int64(c.heapAfter)-int64(c.heapBefore)) / float64(r.apps)
	fmt.Fprintf(tw, "platform's heap per app (controllers and their cache, the edge's cache and table)\t%.1f KiB (%s for %d)\t\n", perApp/1024, mib(c.heapAfter-c.heapBefore), r.apps)
	fmt.Fprintf(tw, "controllers' requests until converged\t%s\t\n", counts(c.requests))
	fmt.Fprintf(tw, "controllers' writes until converged\t%s\t\n", counts(c.writes))
	fmt.Fprintf(tw, "controllers' writes of Apps per App (the App and its status)\t%.2f\t\n", float64(appWrites(c.writes))/float64(r.apps))
	pb, pa := r.planeBefore, c.planeAfter
	fmt.Fprintf(tw, "kube-apiserver RSS (its watch caches included), before seeding / converged\t%s / %s, %s per app\t\n", mib(pb.apiserverRSS), mib(pa.apiserverRSS), kibPer(pb.apiserverRSS, pa.apiserverRSS, r.apps))
	fmt.Fprintf(tw, "kube-apiserver Go heap %s, before seeding / converged\t%s / %s, %s per app\t\n", pa.apiserverHeapKind, mib(pb.apiserverHeap), mib(pa.apiserverHeap), kibPer(pb.apiserverHeap, pa.apiserverHeap, r.apps))
	fmt.Fprintf(tw, "etcd RSS, before seeding / converged\t%s / %s, %s per app\t\n", mib(pb.etcdRSS), mib(pa.etcdRSS), kibPer(pb.etcdRSS, pa.etcdRSS, r.apps))
	fmt.Fprintf(tw, "etcd Go heap %s, before seeding / converged\t%s / %s, %s per app\t\n", pa.etcdHeapKind, mib(pb.etcdHeap), mib(pa.etcdHeap), kibPer(pb.etcdHeap, pa.etcdHeap, r.apps))
	fmt.Fprintf(tw, "etcd database, before seeding / converged\t%s / %s, %s per app\t\n", mib(pb.etcdDB), mib(pa.etcdDB), kibPer(pb.etcdDB, pa.etcdDB, r.apps))
	fmt.Fprintf(tw, "etcd database in use, before seeding / converged\t%s / %s, %s per app\t\n", mib(pb.etcdDBInUse), mib(pa.etcdDBInUse), kibPer(pb.etcdDBInUse, pa.etcdDBInUse, r.apps))
	fmt.Fprintf(tw, "app list of one tenant (%d apps), %d apps in the cluster: p50 / p99\t%s / %s\t\n",
		r.listSmall.tenantApps, r.listSmall.clusterApps, ms(r.listSmall.took.quantile(0.5)), ms(r.listSmall.took.quantile(0.99)))
	fmt.Fprintf(tw, "app list of one tenant (%d apps), %d apps in the cluster: p50 / p99\t%s / %s\t\n",
		r.listLarge.tenantApps, r.listLarge.clusterApps, ms(r.listLarge.took.quantile(0.5)), ms(r.listLarge.took.quantile(0.99)))
	fmt.Fprintf(tw, "app list, ratio %d / %d apps: p50 / p99\t%.2f / %.2f\t\n", r.listLarge.clusterApps, r.listSmall.clusterApps,
		ratio(r.listLarge.took.quantile(0.5), r.listSmall.took.quantile(0.5)), ratio(r.listLarge.took.quantile(0.99), r.listSmall.took.quantile(0.99)))
	e := r.edge
	fmt.Fprintf(tw, "edge table from a cold cache (%d Routes)\t%s\t\n", e.entries, e.cold.Round(time.Millisecond))
	fmt.Fprintf(tw, "edge table rebuild after a change (list, entries, SetRoutes; median of %d)\t%s\t\n", rebuildRuns, ms(e.rebuild))
	fmt.Fprintf(tw, "edge SetRoutes alone (median of %d)\t%s\t\n", rebuildRuns, ms(e.setRoutes))
	fmt.Fprintf(tw, "edge Table heap\t%s (%.0f B per Route)\t\n", mib(uint64(max(e.tableHeap, 0))), float64(e.tableHeap)/float64(max(e.entries, 1)))
	fmt.Fprintf(tw, "edge table updates while the controllers converged\t%d\t\n", c.edgeUpdates)
	fmt.Fprintf(tw, "a deleted Route out of the edge's table (median of %d)\t%s\t\n", len(e.removal), ms(e.removal.quantile(0.5)))
	fmt.Fprintf(tw, "edge cache and Table heap\t%s (%.1f KiB per Route)\t\n", mib(e.cacheHeap), float64(e.cacheHeap)/1024/float64(max(e.entries, 1)))
	direct := e.latency[scenarioDirect]
	for _, sc := range []struct {
		name  string
		hosts int
	}{{scenarioDirect, 0}, {scenarioFew, e.fewHosts}, {scenarioAll, e.entries}} {
		l := e.latency[sc.name]
		fmt.Fprintf(tw, "%s: p50 / p99 (%d requests)\t%s / %s\t\n", sc.name, len(l), ms(l.quantile(0.5)), ms(l.quantile(0.99)))
	}
	few, all := e.latency[scenarioFew], e.latency[scenarioAll]
	for _, q := range []float64{0.5, 0.99} {
		af, aa := few.quantile(q)-direct.quantile(q), all.quantile(q)-direct.quantile(q)
		fmt.Fprintf(tw, "edge's added p%.0f, %d / %d hostnames\t%s / %s (ratio %.2f)\t\n", q*100, e.fewHosts, e.entries, ms(af), ms(aa), ratio(aa, af))
	}
	fmt.Fprintf(tw, "controllers' requests per second once converged (%s)\t%s\t\n", c.window.Round(time.Second), rates(c.steady))
	fmt.Fprintf(tw, "reconciles per second once converged, runtime polled\t%s\t\n", rates(c.reconciles))
	fmt.Fprintf(tw, "reconciles per second once converged, runtime watching\t%s (App %.2f× the polled)\t\n",
		rates(c.watchedReconciles), c.watchedReconciles[appctrl.ControllerName]/max(c.reconciles[appctrl.ControllerName], 0.001))
	fmt.Fprintf(tw, "workqueue depth at the end\t%s\t\n", rates(c.queue))
	tw.Flush()
}

// kibPer is the growth from before to after per app, in KiB; negative
// when it shrank.
func kibPer(before, after uint64, apps int) string {
	return fmt.Sprintf("%.1f KiB", (float64(after)-float64(before))/1024/float64(apps))
}

func finalizerWords(finalizer bool) string {
	if finalizer {
		return "with the App controller's finalizer, as the API creates them"
	}
	return "without the App controller's finalizer (--finalizer=false), as kubectl would"
}

// appWrites sums the writes of Apps and their status.
func appWrites(writes map[string]int) int {
	n := 0
	for k, v := range writes {
		if _, res, _ := strings.Cut(k, " "); res == "apps" || res == "apps/status" {
			n += v
		}
	}
	return n
}

// counts writes a map of counts as "k v, ...", sorted by key.
func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// rates writes a map of rates as "k v, ...", sorted by key.
func rates(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
