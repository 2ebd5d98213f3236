package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/store"
)

// runStopPoll is how often a server holding runs reads the stops asked
// of them through other servers.
const runStopPoll = time.Second

// maxRunStopRestarts bounds how many times the stop watch is started again
// after a panic while it holds runs; past it, stops asked through other
// servers wait for the runs' time limits (a stop asked of this server
// still ends its run at once).
const maxRunStopRestarts = 5

// stopRun asks a running run to stop: the store records who asked (which
// other servers read), and when this server runs it, its command is ended
// at once (SIGTERM, then SIGKILL after the grace period), its reason
// "stopped by <actor>". It answers 202 with the run's record as it stands
// once the stop is asked; how it ended comes to its record. A run that
// has ended is a 409, an unknown one a 404.
func (s *Server) stopRun(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	ref := c.Param("run")
	number, err := strconv.Atoi(strings.TrimPrefix(strings.ToLower(ref), "run."))
	if err != nil || number < 1 || number > math.MaxInt32 {
		return notFound("run %q of app %q not found: give its number as bex runs lists it, such as run.3 or 3", ref, app.Name)
	}
	p := principalOf(c)
	run, err := s.store.RequestRunStop(c.Request().Context(), p.tenant.ID, app.Name, number, p.actor())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound("app %q has no run.%d: bex runs %s lists them", app.Name, number, app.Name)
	case errors.Is(err, store.ErrConflict):
		how := string(run.Status)
		if run.ExitCode != nil {
			how = fmt.Sprintf("exit status %d", *run.ExitCode)
		}
		if run.Reason != "" {
			how += ", " + run.Reason
		}
		return &httpError{status: http.StatusConflict, message: fmt.Sprintf(
			"run.%d of %s has ended already (%s): there is nothing to stop", number, app.Name, how)}
	case err != nil:
		return err
	}
	s.runs.end(run.ID, stopCause(run.StopRequestedBy))
	s.audit(c, "app.run.stop", app.Name, map[string]any{"run": run.Number})
	return c.JSON(http.StatusAccepted, oneOffView(run))
}

// stopCause is the cause a stopped run's context ends with: its record's
// reason, and what bex run prints.
func stopCause(by string) error { return runStopped{by: by} }

// runStopped is the cause of a run stopped by whom a stop was asked.
type runStopped struct{ by string }

func (e runStopped) Error() string { return "stopped by " + e.by }

// lostCause is the cause a run's context ends with when its server finds
// it marked lost (the server was not seen for a while, and may be the
// only one who thinks it still runs): the run no longer counts, so it
// must not go on. Its record stays lost.
func lostCause(reason string) error { return fmt.Errorf("marked lost: %s", reason) }

// localRuns are the runs this server runs, by run ID, and the watch that
// ends those a stop was asked of through another server, and those marked
// lost while this server went unseen (lostruns.go). The watch runs only
// while the server holds runs: every runStopPoll it asks the store which
// of them to end (one query over their IDs) and ends them. It is safe for
// concurrent use.
type localRuns struct {
	store *store.Store
	log   logr.Logger
	every time.Duration

	mu       sync.Mutex
	runs     map[string]*localRun
	watching bool
	restarts int
}

// localRun is one run this server runs.
type localRun struct {
	// end ends its context with a cause.
	end     context.CancelCauseFunc
	stopped bool
}

func newLocalRuns(st *store.Store, log logr.Logger, every time.Duration) *localRuns {
	return &localRuns{store: st, log: log, every: every, runs: map[string]*localRun{}}
}

// add holds the run id, whose command's context end ends, and starts the
// watch when it is not running; the returned func lets go of it, once
// the run's command has ended.
func (l *localRuns) add(id string, end context.CancelCauseFunc) (done func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[id] = &localRun{end: end}
	if !l.watching {
		l.watching = true
		go l.watch()
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.runs, id)
	}
}

// end ends the run id with cause when this server runs it (the first
// cause stays); it reports whether it did.
func (l *localRuns) end(id string, cause error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.runs[id]
	if !ok {
		return false
	}
	if !r.stopped {
		r.stopped = true
		r.end(cause)
	}
	return true
}

// pending returns the IDs of the runs held and not stopped yet; none ends
// the watch (watching false), under the same lock add starts it under.
func (l *localRuns) pending() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, 0, len(l.runs))
	for id, r := range l.runs {
		if !r.stopped {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		l.watching = false
	}
	return ids
}

// watch polls the store for the runs held that must end, until there are
// none left to watch. A panic starts it again, at most maxRunStopRestarts
// times in the server's life.
func (l *localRuns) watch() {
	defer func() {
		if v := recover(); v != nil {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.restarts++
			l.log.Error(fmt.Errorf("%v", v), "Run stop watch panicked", "restarts", l.restarts)
			if l.restarts > maxRunStopRestarts {
				// add never starts it again: watching stays true.
				return
			}
			go l.watch()
		}
	}()
	ticker := time.NewTicker(l.every)
	defer ticker.Stop()
	for range ticker.C {
		ids := l.pending()
		if len(ids) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*l.every)
		toEnd, err := l.store.RunsToEnd(ctx, ids)
		cancel()
		if err != nil {
			l.log.Error(err, "Reading which runs to end", "runs", len(ids))
			continue
		}
		for _, r := range toEnd {
			if r.Status == store.RunLost {
				l.log.Info("Ending a run marked lost while this server went unseen", "app", r.App, "run", r.Number)
				l.end(r.ID, lostCause(r.Reason))
				continue
			}
			l.end(r.ID, stopCause(r.StopRequestedBy))
		}
	}
}
