package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bounds of the notifier's connection.
const (
	// listenTimeout bounds connecting and LISTENing.
	listenTimeout = 10 * time.Second
	// listenBackoffMax is the longest wait between two attempts to connect
	// after the connection broke or could not be made.
	listenBackoffMax = 5 * time.Second
)

// notifier multiplexes the NOTIFY channel bex_build_logs over one connection
// of the process: it LISTENs on a dedicated connection (outside the pool)
// and wakes the subscribers of the build each notification names.
//
// A subscriber has a wake-up buffer of one: a notification that finds it
// full is dropped, so a slow subscriber never holds up the others, and a
// subscriber reads the table from the last row it saw whenever it wakes,
// so that a dropped wake-up loses nothing. When the connection breaks the
// notifier connects again with backoff and then wakes every subscriber, so
// that each reads what was appended meanwhile.
//
// It starts with the first subscription and stops with Store.Close.
type notifier struct {
	connConfig *pgx.ConnConfig

	mu      sync.Mutex
	subs    map[string]map[*subscription]struct{}
	started bool
	stopped bool
	// listening is whether the connection LISTENs now.
	listening bool
	// lastErr is why the last attempt to listen failed, or why the
	// connection broke.
	lastErr error
	// attempted is closed, and replaced, after each attempt to listen.
	attempted chan struct{}
	// kick cuts a backoff short: a subscriber is waiting for a connection.
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func newNotifier(cfg *pgx.ConnConfig) *notifier {
	return &notifier{
		connConfig: cfg,
		subs:       map[string]map[*subscription]struct{}{},
		attempted:  make(chan struct{}),
		kick:       make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
}

// subscription is one subscriber's registration for one build.
type subscription struct {
	n       *notifier
	buildID string
	// wake holds at most one pending wake-up.
	wake chan struct{}
}

// errStopped is returned by subscribe after the store was closed.
var errStopped = errors.New("the store is closed")

// subscribe registers for the notifications about buildID and returns once
// the notifier listens, so that every notification sent afterwards wakes
// the subscription. When the notifier cannot listen now, it returns why,
// after one attempt made for this call at the latest.
func (n *notifier) subscribe(ctx context.Context, buildID string) (*subscription, error) {
	sub := &subscription{n: n, buildID: buildID, wake: make(chan struct{}, 1)}
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return nil, errStopped
	}
	if n.subs[buildID] == nil {
		n.subs[buildID] = map[*subscription]struct{}{}
	}
	n.subs[buildID][sub] = struct{}{}
	if !n.started {
		n.started = true
		runCtx, cancel := context.WithCancel(context.Background())
		n.cancel = cancel
		go n.run(runCtx)
	}
	listening, attempted := n.listening, n.attempted
	n.mu.Unlock()
	if listening {
		return sub, nil
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
	select {
	case <-attempted:
	case <-ctx.Done():
		sub.close()
		return nil, ctx.Err()
	}
	n.mu.Lock()
	listening, err := n.listening, n.lastErr
	n.mu.Unlock()
	if !listening {
		sub.close()
		if err == nil {
			err = errors.New("the connection broke")
		}
		return nil, fmt.Errorf("listening for notifications: %w", err)
	}
	return sub, nil
}

// close ends the subscription; it may be called more than once.
func (sub *subscription) close() {
	n := sub.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if set := n.subs[sub.buildID]; set != nil {
		delete(set, sub)
		if len(set) == 0 {
			delete(n.subs, sub.buildID)
		}
	}
}

// run connects, listens and dispatches until ctx ends, connecting again
// with backoff whenever the connection breaks.
func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	backoff := 100 * time.Millisecond
	for {
		conn, err := n.listen(ctx)
		n.mu.Lock()
		n.listening, n.lastErr = err == nil, err
		close(n.attempted)
		n.attempted = make(chan struct{})
		n.mu.Unlock()
		if err == nil {
			backoff = 100 * time.Millisecond
			// Whatever was notified while nobody listened is in the
			// table: every subscriber reads it again.
			n.wakeAll()
			err = n.receive(ctx, conn)
			_ = conn.Close(context.Background())
			n.mu.Lock()
			n.listening, n.lastErr = false, err
			n.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-n.kick:
		case <-t.C:
		}
		t.Stop()
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// listen opens the notifier's connection and LISTENs on it.
func (n *notifier) listen(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, listenTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, n.connConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+buildLogsChannel); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// receive dispatches notifications until the connection breaks or ctx ends.
func (n *notifier) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		n.mu.Lock()
		for sub := range n.subs[note.Payload] {
			sub.signal()
		}
		n.mu.Unlock()
	}
}

// wakeAll wakes every subscriber.
func (n *notifier) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, set := range n.subs {
		for sub := range set {
			sub.signal()
		}
	}
}

// signal leaves a wake-up unless one is pending; it never blocks.
func (sub *subscription) signal() {
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// stop closes the connection and waits for the notifier to end.
func (n *notifier) stop() {
	n.mu.Lock()
	n.stopped = true
	started := n.started
	n.mu.Unlock()
	if !started {
		return
	}
	n.cancel()
	<-n.done
}
