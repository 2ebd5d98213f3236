package app

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/appmetrics"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/store"
)

// seriesLockClass is the first key of the advisory lock that says which
// bex-web replica saves the apps' series; the store's locks use other
// classes ("bexa" apps, "bexq" quotas) and the one-key form.
const seriesLockClass int32 = 0x62657873 // "bexs"

// seriesLockRetry is how often a replica without the lock tries to take
// it, and how often the holder checks that its connection still holds it.
const seriesLockRetry = 10 * time.Second

// seriesSaver is the appmetrics.SeriesStore of a bex-web replica. Every
// replica samples the apps for its own answers and loads the saved series
// when it starts; only the replica that holds the series lock saves, so
// that the store has one writer (a save writes the changed apps' points
// and deletes the others). A replica without the lock answers
// appmetrics.ErrNotSaved: its sampler writes every app at its next save.
// One that took the lock since its last save answers appmetrics.ErrTookOver
// once: another replica may have saved since, and its sampler merges those
// rows into its own points before it writes every app. The lock is a
// session-level advisory lock on a connection of its own, outside the
// pool: a replica that dies or loses its connection releases it, and
// another takes it within seriesLockRetry.
type seriesSaver struct {
	st *store.Store
	// retry is how often hold tries the lock and checks it holds it
	// [seriesLockRetry].
	retry time.Duration
	held  atomic.Bool
	// taken counts the times hold took the lock; saving is its value at
	// the last save (saves do not overlap).
	taken  atomic.Uint64
	saving uint64
}

var _ appmetrics.SeriesStore = (*seriesSaver)(nil)

func (s *seriesSaver) SaveAppSeries(ctx context.Context, all iter.Seq[store.AppSeries]) error {
	if !s.held.Load() {
		return appmetrics.ErrNotSaved
	}
	if taken := s.taken.Load(); taken != s.saving {
		s.saving = taken
		return appmetrics.ErrTookOver
	}
	return s.st.SaveAppSeries(ctx, all)
}

func (s *seriesSaver) LoadAppSeries(ctx context.Context, tenants, apps []string, since time.Time) ([]store.AppSeries, error) {
	return s.st.LoadAppSeries(ctx, tenants, apps, since)
}

// hold takes the series lock whenever it is free and keeps it until ctx
// ends or its connection breaks.
func (s *seriesSaver) hold(ctx context.Context, log logr.Logger) {
	t := time.NewTicker(cmp.Or(s.retry, seriesLockRetry))
	defer t.Stop()
	var conn *pgx.Conn
	defer func() {
		s.held.Store(false)
		if conn != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = conn.Close(cctx)
			cancel()
		}
	}()
	for {
		if conn != nil {
			// The lock is held as long as its session is.
			if err := conn.Ping(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				log.Error(err, "Lost the connection that holds the series lock; another replica saves the apps' series")
				s.held.Store(false)
				_ = conn.Close(ctx)
				conn = nil
			}
		}
		if conn == nil {
			c, err := s.tryLock(ctx)
			if err != nil && ctx.Err() == nil {
				log.Error(err, "Taking the series lock")
			}
			if c != nil {
				conn = c
				s.taken.Add(1)
				s.held.Store(true)
				log.Info("Saving the apps' series: this replica holds the series lock")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tryLock connects and takes the series lock; nil without error when
// another session holds it.
func (s *seriesSaver) tryLock(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.st.Pool().Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, 0)", seriesLockClass).Scan(&ok); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	if !ok {
		_ = conn.Close(ctx)
		return nil, nil
	}
	return conn, nil
}

// startSeries starts the apps' series: a sampler over the workload
// cluster's driver (restarts from Status, CPU and memory from Usage: the
// nodes' stats summaries), the Apps of kube, the saved series of st, and,
// with edgeAddrs, the requests the edges counted. It runs until ctx ends;
// the returned wait returns once the last save (if this replica holds the
// lock) is done.
func (o *Options) startSeries(ctx context.Context, st *store.Store, kube client.Reader, rt runtime.Driver, log logr.Logger) (*appmetrics.Sampler, func(), error) {
	saver := &seriesSaver{st: st}
	s, err := appmetrics.New(appmetrics.Options{
		Apps: appmetrics.KubeApps(kube), Runtime: rt, Interval: o.AppMetricsInterval, Saved: saver, Log: log,
	})
	if err != nil {
		return nil, nil, err
	}
	var reader *appmetrics.EdgeReader
	if len(o.EdgeMetrics) > 0 {
		addrs, err := appmetrics.DNSAddrs(o.EdgeMetrics)
		if err != nil {
			return nil, nil, fmt.Errorf("--edge-metrics: %w", err)
		}
		token, err := appmetrics.ReadToken(o.EdgeMetricsTokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--edge-metrics-token-file: %w", err)
		}
		if reader, err = appmetrics.NewEdgeReader(s, appmetrics.EdgeReaderOptions{Addrs: addrs, Token: token, Log: log}); err != nil {
			return nil, nil, err
		}
	}
	if err := s.Load(ctx, time.Now()); err != nil {
		// The replica samples without the saved series.
		log.Error(err, "Loading the apps' saved series")
	}
	lockCtx, unlock := context.WithCancel(context.WithoutCancel(ctx))
	locked := make(chan struct{})
	go func() {
		defer close(locked)
		saver.hold(lockCtx, log)
	}()
	read := make(chan struct{})
	go func() {
		defer close(read)
		if reader != nil {
			reader.Run(ctx)
		}
	}()
	// The sampler stops after the reader's last read: its last sample
	// holds the requests read then.
	sampleCtx, stopSampling := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		<-ctx.Done()
		<-read
		stopSampling()
	}()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s.Run(sampleCtx)
	}()
	wait := func() {
		<-read
		<-sampled // its last save, under the lock
		unlock()
		<-locked
	}
	return s, wait, nil
}
