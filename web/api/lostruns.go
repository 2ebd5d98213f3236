package api

import (
	"context"
	"fmt"
	"sync"
	"time"

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
// lost by the other servers.
const maxRunKeeperRestarts = 5

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
// runs for lost once RunLostAfter has passed. Run returns nil when ctx
// ends, and an error once its loop has panicked past its restarts.
func (s *Server) Run(ctx context.Context) error {
	keep := func() bool {
		s.keepRuns(ctx)
		return true
	}
	if !every.Run(ctx, s.log, "Run keeper", s.runHeartbeat, maxRunKeeperRestarts, keep) {
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
	}
	s.writeUnwritten(ctx)
}

// unwrittenEnds are the ends of runs a server could not record
// (finishRun), by run ID.
type unwrittenEnds struct {
	mu   sync.Mutex
	ends map[string]unwrittenEnd
}

type unwrittenEnd struct {
	run store.Run
	res store.RunResult
}

func (u *unwrittenEnds) add(run store.Run, res store.RunResult) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ends == nil {
		u.ends = map[string]unwrittenEnd{}
	}
	u.ends[run.ID] = unwrittenEnd{run: run, res: res}
}

// taken empties u and returns what it held.
func (u *unwrittenEnds) taken() []unwrittenEnd {
	u.mu.Lock()
	defer u.mu.Unlock()
	all := make([]unwrittenEnd, 0, len(u.ends))
	for _, e := range u.ends {
		all = append(all, e)
	}
	clear(u.ends)
	return all
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
