package localfleet

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"bex.co/bex/internal/childproc"
)

// supervised is the supervision state a control-plane machine and a
// worker share: the main process (kube-apiserver or bex-node), how often
// it was started again, and the supervisor's stop and done signals. mu
// guards the machine's other mutable fields too.
type supervised struct {
	mu       sync.Mutex
	proc     *childproc.Process
	restarts int
	stopping bool          // no restart: deleted, lost or halted
	stop     chan struct{} // ends the supervisor
	done     chan struct{} // closed when the supervisor ended
}

func newSupervised() supervised {
	return supervised{stop: make(chan struct{}), done: make(chan struct{})}
}

// Running reports whether the main process is alive.
func (s *supervised) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.Exited()
}

// Restarts returns how often the main process was started again after it
// exited.
func (s *supervised) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// PID returns the main process's ID, 0 when none runs.
func (s *supervised) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// isStopping reports whether the machine is being deleted, lost or
// halted: nothing of it is restarted.
func (s *supervised) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// current returns the main process.
func (s *supervised) current() *childproc.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// signalStop marks the machine stopping and ends its supervisor loops.
func (s *supervised) signalStop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
}

// keeper is what the supervisor loops of one machine share: where they
// log, the machine's stop signal, and whether it is stopping (deleted,
// lost or halted: nothing is restarted then).
type keeper struct {
	log          io.Writer
	what         string // "machine NAME" or "worker NAME", in the log
	startTimeout time.Duration
	stop         <-chan struct{}
	stopping     func() bool
	mu           *sync.Mutex // guards restartable.restarts
}

// restartable says how keepRunning restarts one process of a machine.
type restartable struct {
	name    string                          // in the log
	current func() *childproc.Process       // the process that runs
	exited  func(ctx context.Context)       // once it has exited [nothing]
	start   func(ctx context.Context) error // starts it and waits until it is ready
	ready   func(ctx context.Context)       // once it is ready again [nothing]
	// restarts, when set, counts the starts after an exit, under mu.
	restarts *int
}

// keepRunning restarts a process when it exits, as the kubelet restarts a
// static Pod's container (or systemd the kubelet): 1, 2, 4 … 30 seconds
// apart, back to 1 once a start is ready, until the machine is stopped.
func (k keeper) keepRunning(r restartable) {
	backoff := time.Second
	for {
		proc := r.current()
		select {
		case <-k.stop:
			return
		case <-proc.Done():
		}
		if k.stopping() {
			<-k.stop
			return
		}
		fmt.Fprintf(k.log, "%s: %s exited (%v), restarting in %s\n", k.what, r.name, proc.Err(), backoff)
		if r.exited != nil {
			ctx, cancel := k.stopContext(10 * time.Second)
			r.exited(ctx)
			cancel()
		}
		select {
		case <-k.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
		ctx, cancel := k.stopContext(k.startTimeout)
		err := r.start(ctx)
		cancel()
		if r.restarts != nil {
			k.mu.Lock()
			*r.restarts++
			k.mu.Unlock()
		}
		if err != nil {
			fmt.Fprintf(k.log, "%s: restarting %s: %v\n", k.what, r.name, err)
			continue
		}
		backoff = time.Second
		if r.ready != nil {
			ctx, cancel = k.stopContext(10 * time.Second)
			r.ready(ctx)
			cancel()
		}
	}
}

// stopContext returns a context that ends after timeout or once the
// machine is stopped.
func (k keeper) stopContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	go func() {
		select {
		case <-k.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
