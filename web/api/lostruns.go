package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"bex.co/bex/internal/every"
	"bex.co/bex/internal/store"
)

// Defaults of Options.RunHeartbeat and Options.RunLostAfter: a run whose
// server died is marked lost 30 to 35 seconds after its last heartbeat.
const (
	DefaultRunHeartbeat = 5 * time.Second
	DefaultRunLostAfter = 30 * time.Second
)

// maxRunKeeperRestarts bounds how many times Run's loop is started again
// after a panic; past it, Run returns and the server's runs are taken for
// lost by the other servers. The reaper's loop has as many restarts.
const maxRunKeeperRestarts = 5

// runSweepInterval is how often Run has Options.RunReaper delete the
// instances of ended runs past their retention (SweepRuns).
const runSweepInterval = time.Minute

// runReapTimeout bounds one round of the reaper: the stops of the lost
// runs' instances and a sweep.
const runReapTimeout = 30 * time.Second

// lostRunRetries is how long the stop of a lost run's instance is tried
// again before it is left to the run's time limit.
const lostRunRetries = time.Hour

// Run keeps the server's one-off runs alive in the store and ends those
// of servers that stopped answering, until ctx ends. Every
// Options.RunHeartbeat it records that this server process is alive —
// one upsert for all the runs it runs (store.HeartbeatRunServer) — and
// marks lost every running run whose server has not been seen within
// Options.RunLostAfter (store.MarkLostRuns): such a run ends, without an
// exit status, and stops counting towards its tenant's concurrentRuns
// quota at once; its end is audited (app.run.end, ended lost, by the
// platform) in the same statement. Every replica sweeps; the store makes sweeps that race
// end each run once. A server that runs one-off runs must be Run: without
// its heartbeats, the other servers (and its own next process) take its
// runs for lost once RunLostAfter has passed.
//
// With Options.RunReaper, a loop of its own (so that a slow cluster
// delays no heartbeat) stops there, every RunHeartbeat, the instance of
// each run this server marked lost (RunReaper.EndRun: a workload
// cluster's run Pod, which outlives the server that ran it), trying one
// that fails again at its next round for up to lostRunRetries, and every
// runSweepInterval has it delete the instances of ended runs past their
// retention (RunReaper.SweepRuns). Run returns nil when ctx ends, and an
// error once its keeper's loop has panicked past its restarts.
func (s *Server) Run(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var reaper sync.WaitGroup
	if s.reaper != nil {
		reaper.Go(func() {
			reap := func() bool {
				s.reapRuns(ctx)
				return true
			}
			if !every.Run(ctx, s.log, "Run reaper", s.runHeartbeat, maxRunKeeperRestarts, reap) {
				s.log.Error(errors.New("the one-off run reaper panicked past its restarts"), "The instances of lost runs now end at their time limits")
			}
		})
	}
	keep := func() bool {
		s.keepRuns(ctx)
		return true
	}
	kept := every.Run(ctx, s.log, "Run keeper", s.runHeartbeat, maxRunKeeperRestarts, keep)
	stop()
	reaper.Wait()
	if !kept {
		return fmt.Errorf("the one-off run keeper panicked %d times: this server's runs will be taken for lost", maxRunKeeperRestarts+1)
	}
	return nil
}

// keepRuns is one heartbeat of the server and, when it went through, one
// sweep of lost runs and the ends of its own runs it could not record
// before (finishRun): a server that cannot say it is alive judges no
// other, and one that can never takes its own runs for lost. They take
// at most a third of the deadline together: a late heartbeat still
// counts.
func (s *Server) keepRuns(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, s.runLostAfter/3)
	defer cancel()
	if err := s.store.HeartbeatRunServer(ctx, s.serverID); err != nil {
		if parent.Err() == nil {
			s.log.Error(err, "Could not record that this server is alive; its runs are taken for lost when it stays so", "lostAfter", s.runLostAfter)
		}
		return
	}
	lost, err := s.store.MarkLostRuns(ctx, s.runLostAfter)
	if err != nil && parent.Err() == nil {
		s.log.Error(err, "Could not mark the runs of servers gone as lost")
	}
	for _, r := range lost {
		s.log.Info("Run lost: its server stopped answering", "tenantID", r.TenantID, "app", r.App, "run", r.Number, "server", r.ServerID)
		if s.reaper != nil {
			s.lost.add(r.ID, lostRun{run: r, since: time.Now()})
		}
	}
	s.writeUnwritten(ctx)
}

// pendingRuns is work left for a later round of Run, by run ID. It is
// safe for concurrent use.
type pendingRuns[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// add holds v for the run id, in place of what it held for it.
func (p *pendingRuns[T]) add(id string, v T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]T{}
	}
	p.m[id] = v
}

// taken empties p and returns what it held.
func (p *pendingRuns[T]) taken() []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	all := make([]T, 0, len(p.m))
	for _, v := range p.m {
		all = append(all, v)
	}
	clear(p.m)
	return all
}

// unwrittenEnds are the ends of runs a server could not record
// (finishRun), by run ID.
type unwrittenEnds struct {
	pendingRuns[unwrittenEnd]
}

type unwrittenEnd struct {
	run store.Run
	res store.RunResult
}

func (u *unwrittenEnds) add(run store.Run, res store.RunResult) {
	u.pendingRuns.add(run.ID, unwrittenEnd{run: run, res: res})
}

// lostRun is a run this server marked lost, since when, and its
// tenant's name once read.
type lostRun struct {
	run    store.Run
	since  time.Time
	tenant string
}

// reapRuns is one round of the reaper: it stops the instances of the
// runs marked lost (endLost) and, every runSweepInterval, has the reaper
// sweep.
func (s *Server) reapRuns(parent context.Context) {
	ctx, cancel := context.WithTimeout(logr.NewContext(parent, s.log), runReapTimeout)
	defer cancel()
	s.endLost(ctx)
	if time.Since(s.lastRunSweep) < runSweepInterval {
		return
	}
	s.lastRunSweep = time.Now()
	if err := s.reaper.SweepRuns(ctx); err != nil && parent.Err() == nil {
		s.log.Error(err, "Could not delete every instance of the one-off runs that ended; trying again at the next sweep", "every", runSweepInterval)
	}
}

// endLost stops the instances of the runs marked lost through the
// reaper, keeping those it could not stop for the next round, for
// lostRunRetries. A run whose tenant is gone has nothing left.
func (s *Server) endLost(ctx context.Context) {
	for _, l := range s.lost.taken() {
		if ctx.Err() != nil {
			s.lost.add(l.run.ID, l)
			continue
		}
		var err error
		if l.tenant == "" {
			var t store.Tenant
			if t, err = s.store.GetTenant(ctx, l.run.TenantID); errors.Is(err, store.ErrNotFound) {
				continue
			}
			l.tenant = t.Name
		}
		if err == nil {
			err = s.reaper.EndRun(ctx, l.tenant, l.run.App, l.run.ID)
		}
		switch {
		case err == nil:
			s.log.Info("Had the runtime stop what a lost run ran", "tenant", l.tenant, "app", l.run.App, "run", l.run.Number)
		case time.Since(l.since) > lostRunRetries:
			s.log.Error(err, "Gave up stopping what a lost run runs; it ends at its time limit", "tenantID", l.run.TenantID, "app", l.run.App, "run", l.run.Number)
		default:
			s.log.Error(err, "Could not stop what a lost run runs; trying again", "tenantID", l.run.TenantID, "app", l.run.App, "run", l.run.Number)
			s.lost.add(l.run.ID, l)
		}
	}
}

// writeUnwritten tries again to record the ends finishRun could not,
// keeping those that fail again for the next heartbeat.
func (s *Server) writeUnwritten(ctx context.Context) {
	for _, e := range s.unwritten.taken() {
		if err := s.writeEnd(ctx, e.run, e.res); err != nil {
			if ctx.Err() == nil {
				s.log.Error(err, "Recording the end of a run again", "app", e.run.App, "run", e.run.Number)
			}
			s.unwritten.add(e.run, e.res)
			continue
		}
		s.log.Info("Recorded the end of a run at last", "app", e.run.App, "run", e.run.Number)
	}
}
