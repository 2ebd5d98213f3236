package pgserver

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Restart backoff of a supervised server: the first attempt at once, then
// doubling up to the cap.
const (
	restartBackoff    = 500 * time.Millisecond
	restartBackoffCap = 30 * time.Second
)

// Event is what a Supervisor reports to its Notify function: the server
// exited (Err says how), or it is back (Err is nil).
type Event struct {
	// Port is the server's port, the same across restarts.
	Port int
	// Restarts counts the restarts so far, this one included once back.
	Restarts int
	// Err is why the server exited, or why a restart failed; nil when the
	// server accepts connections again.
	Err error
}

// Supervisor keeps a server running: when postgres exits other than by
// Stop (killed, crashed, out of memory), it starts it again on the same
// port and data directory, with the same password, so that URLs handed out
// stay good and connection pools reconnect on their own. Its methods are
// safe for concurrent use.
type Supervisor struct {
	opts   Options
	notify func(Event)

	mu       sync.Mutex
	cur      *Server
	restarts int
	stopping bool

	stop chan struct{}
	done chan struct{}
}

// Supervise starts a server as Start does and keeps it running until Stop.
// notify, when not nil, is called from the supervising goroutine on each
// exit and each successful restart.
func Supervise(ctx context.Context, opts Options, notify func(Event)) (*Supervisor, error) {
	s, err := Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	opts.Port = s.Port()
	if notify == nil {
		notify = func(Event) {}
	}
	sv := &Supervisor{opts: opts, notify: notify, cur: s, stop: make(chan struct{}), done: make(chan struct{})}
	go sv.run()
	return sv, nil
}

// URL returns the URL of database db, as Server.URL.
func (sv *Supervisor) URL(db string) string { return sv.server().URL(db) }

// Port returns the server's TCP port.
func (sv *Supervisor) Port() int { return sv.opts.Port }

// Restarts returns how often the server was started again.
func (sv *Supervisor) Restarts() int {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.restarts
}

// Server returns the server that runs now, or ran last.
func (sv *Supervisor) server() *Server {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.cur
}

// PID returns the process id of the running postgres.
func (sv *Supervisor) PID() int { return sv.server().cmd.Process.Pid }

// Stop stops supervising and shuts the server down, as Server.Stop.
func (sv *Supervisor) Stop() error {
	sv.mu.Lock()
	if !sv.stopping {
		sv.stopping = true
		close(sv.stop)
	}
	sv.mu.Unlock()
	<-sv.done
	return sv.server().Stop()
}

func (sv *Supervisor) run() {
	defer close(sv.done)
	for {
		cur := sv.server()
		select {
		case <-sv.stop:
			return
		case <-cur.Done():
		}
		sv.notify(Event{Port: sv.opts.Port, Restarts: sv.Restarts(), Err: fmt.Errorf("postgres exited: %v%s", cur.waitErr, cur.out.quote())})
		backoff := time.Duration(0)
		for {
			select {
			case <-sv.stop:
				return
			case <-time.After(backoff):
			}
			// A postmaster that was killed leaves backends that hold its
			// shared memory until they notice; the new server refuses to
			// start until they are gone, so failures are retried.
			ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
			s, err := Start(ctx, sv.opts)
			cancel()
			if err == nil {
				sv.mu.Lock()
				sv.cur = s
				sv.restarts++
				n := sv.restarts
				stopping := sv.stopping
				sv.mu.Unlock()
				sv.notify(Event{Port: sv.opts.Port, Restarts: n})
				if stopping {
					return
				}
				break
			}
			sv.notify(Event{Port: sv.opts.Port, Restarts: sv.Restarts(), Err: fmt.Errorf("starting postgres again: %w", err)})
			backoff = min(max(2*backoff, restartBackoff), restartBackoffCap)
		}
	}
}
