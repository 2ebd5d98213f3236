package tcplb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// Options configures an LB.
type Options struct {
	// DialTimeout bounds each dial to a backend. Zero means two seconds.
	DialTimeout time.Duration
}

// BackendStats counts what one backend received.
type BackendStats struct {
	// Addr is the backend's host:port.
	Addr string
	// InRotation reports whether the backend takes new connections.
	InRotation bool
	// Active is the number of open connections to the backend, counting
	// those of a removed backend that are still draining.
	Active int
	// Total is the number of connections forwarded to the backend since it
	// was first added.
	Total int64
	// DialFailures is the number of dials to the backend that failed (each
	// time the next backend was tried instead).
	DialFailures int64
	// LastDialError is the error of the latest failed dial, if any.
	LastDialError string
}

// Stats is a snapshot of an LB's counters.
type Stats struct {
	// Accepted is the number of connections the LB accepted.
	Accepted int64
	// Refused is the number of accepted connections closed because no
	// backend in the rotation could be reached.
	Refused int64
	// Backends holds every backend ever added, in the order of first
	// addition.
	Backends []BackendStats
}

// Backend returns the stats of addr, and false when addr was never added.
func (s Stats) Backend(addr string) (BackendStats, bool) {
	for _, b := range s.Backends {
		if b.Addr == addr {
			return b, true
		}
	}
	return BackendStats{}, false
}

// LB is a running TCP load balancer. Its methods are safe for concurrent use.
type LB struct {
	ln          net.Listener
	dialTimeout time.Duration
	ctx         context.Context // ended by Close: stops dials and the accept loop
	cancel      context.CancelFunc
	wg          sync.WaitGroup

	mu       sync.Mutex
	rotation []string // backends that take new connections, in round-robin order
	backends map[string]*backend
	order    []string // every backend, in the order of first addition
	next     int      // rotation index of the next connection's first choice
	accepted int64
	refused  int64
	closed   bool
	// ended is closed, and replaced, each time a connection ends, so that
	// WaitDrained can wait without polling.
	ended chan struct{}
}

// backend is one target, in the rotation or not. Guarded by LB.mu.
type backend struct {
	addr         string
	inRotation   bool
	links        map[*link]struct{}
	total        int64
	dialFailures int64
	lastDialErr  string
}

// link is one forwarded connection: the client's and the backend's side.
type link struct {
	client, server net.Conn

	mu sync.Mutex // held while a chunk from the client is written to the server
	// held is non-nil while the link is held (LB.Hold): what the client
	// sends waits until it is closed.
	held      chan struct{}
	closed    chan struct{} // closed by close
	closeOnce sync.Once
}

func newLink(client, server net.Conn) *link {
	return &link{client: client, server: server, closed: make(chan struct{})}
}

func (l *link) close() {
	l.closeOnce.Do(func() { close(l.closed) })
	l.client.Close()
	l.server.Close()
}

// hold makes what the client sends wait until release is closed. It waits
// for a chunk being written to end, so nothing the client sends after it
// returns reaches the server before release.
func (l *link) hold(release chan struct{}) {
	l.mu.Lock()
	l.held = release
	l.mu.Unlock()
}

// forward copies what the client sends to the server, each chunk written
// only while the link is not held.
func (l *link) forward() error {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			if werr := l.write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (l *link) write(p []byte) error {
	for {
		l.mu.Lock()
		release := l.held
		if release == nil {
			_, err := l.server.Write(p)
			l.mu.Unlock()
			return err
		}
		l.mu.Unlock()
		select {
		case <-release:
		case <-l.closed:
			return net.ErrClosed
		}
	}
}

// Listen starts an LB on addr (host:port; port 0 picks one) that forwards to
// backends, in this order.
func Listen(addr string, opts Options, backends ...string) (*LB, error) {
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 2 * time.Second
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	lb := &LB{
		ln:          ln,
		dialTimeout: opts.DialTimeout,
		backends:    map[string]*backend{},
		ended:       make(chan struct{}),
	}
	lb.ctx, lb.cancel = context.WithCancel(context.Background())
	lb.SetBackends(backends...)
	lb.wg.Add(1)
	go lb.serve()
	return lb, nil
}

// Addr returns the address the LB listens on, as host:port.
func (lb *LB) Addr() string { return lb.ln.Addr().String() }

// Backends returns the backends in the rotation, in round-robin order.
func (lb *LB) Backends() []string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return slices.Clone(lb.rotation)
}

// SetBackends makes addrs the rotation. A backend left out is removed as by
// Remove: its open connections drain.
func (lb *LB) SetBackends(addrs ...string) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, b := range lb.backends {
		b.inRotation = false
	}
	lb.rotation = lb.rotation[:0]
	for _, a := range addrs {
		b := lb.backendLocked(a)
		if !b.inRotation {
			b.inRotation = true
			lb.rotation = append(lb.rotation, a)
		}
	}
}

// Add puts addr at the end of the rotation. Adding a backend that is already
// in the rotation does nothing; adding a removed one that still drains puts
// it back, its open connections included.
func (lb *LB) Add(addr string) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	b := lb.backendLocked(addr)
	if b.inRotation {
		return
	}
	b.inRotation = true
	lb.rotation = append(lb.rotation, addr)
}

// Remove takes addr out of the rotation: from the moment it returns, no new
// connection goes to addr. Its open connections go on until either end
// closes them; see WaitDrained and CloseConns. It reports whether addr was in
// the rotation.
func (lb *LB) Remove(addr string) bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	b, ok := lb.backends[addr]
	if !ok || !b.inRotation {
		return false
	}
	b.inRotation = false
	lb.rotation = slices.DeleteFunc(lb.rotation, func(a string) bool { return a == addr })
	return true
}

// WaitDrained waits until addr has no open connection, and returns ctx's
// error if ctx ends first. A backend never added has none.
func (lb *LB) WaitDrained(ctx context.Context, addr string) error {
	for {
		lb.mu.Lock()
		n := 0
		if b, ok := lb.backends[addr]; ok {
			n = len(b.links)
		}
		ended := lb.ended
		lb.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("draining %s: %d connections still open: %w", addr, n, ctx.Err())
		case <-ended:
		}
	}
}

// CloseConns closes the open connections of addr, as a load balancer does
// when a removed target's drain deadline passes, and returns how many it
// closed. It does not change the rotation.
func (lb *LB) CloseConns(addr string) int {
	links := lb.links(addr)
	for _, l := range links {
		l.close()
	}
	return len(links)
}

// Hold stops forwarding what clients send on the connections now open to
// addr, while what addr sends still reaches them, until release is called;
// it returns how many connections it holds. Nothing a client sends after
// Hold returns reaches addr before release: what it sends waits, in order,
// in the LB and in the client's socket. A server that is stopped can thus
// finish the requests it has, and answer those that come after only once
// it is ready to turn them away (kube-apiserver's 429 with Retry-After),
// where a close would fail a client's write in flight. Closing a held
// connection (CloseConns, Close) ends it as any other; release is safe to
// call more than once.
func (lb *LB) Hold(addr string) (held int, release func()) {
	links := lb.links(addr)
	ch := make(chan struct{})
	for _, l := range links {
		l.hold(ch)
	}
	return len(links), sync.OnceFunc(func() {
		for _, l := range links {
			l.hold(nil)
		}
		close(ch)
	})
}

// links returns the open connections of addr.
func (lb *LB) links(addr string) []*link {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var links []*link
	if b, ok := lb.backends[addr]; ok {
		for l := range b.links {
			links = append(links, l)
		}
	}
	return links
}

// Stats returns a snapshot of the counters.
func (lb *LB) Stats() Stats {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	s := Stats{Accepted: lb.accepted, Refused: lb.refused}
	for _, a := range lb.order {
		b := lb.backends[a]
		s.Backends = append(s.Backends, BackendStats{
			Addr:          a,
			InRotation:    b.inRotation,
			Active:        len(b.links),
			Total:         b.total,
			DialFailures:  b.dialFailures,
			LastDialError: b.lastDialErr,
		})
	}
	return s
}

// Close stops listening, closes every forwarded connection and returns once
// no goroutine of the LB is left.
func (lb *LB) Close() error {
	lb.mu.Lock()
	if lb.closed {
		lb.mu.Unlock()
		return nil
	}
	lb.closed = true
	lb.cancel()
	var links []*link
	for _, b := range lb.backends {
		for l := range b.links {
			links = append(links, l)
		}
	}
	lb.mu.Unlock()
	err := lb.ln.Close()
	for _, l := range links {
		l.close()
	}
	lb.wg.Wait()
	return err
}

func (lb *LB) backendLocked(addr string) *backend {
	b, ok := lb.backends[addr]
	if !ok {
		b = &backend{addr: addr, links: map[*link]struct{}{}}
		lb.backends[addr] = b
		lb.order = append(lb.order, addr)
	}
	return b
}

func (lb *LB) serve() {
	defer lb.wg.Done()
	var backoff time.Duration
	for {
		c, err := lb.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-lb.ctx.Done():
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		lb.mu.Lock()
		lb.accepted++
		lb.mu.Unlock()
		lb.wg.Add(1)
		go lb.handle(c)
	}
}

// handle forwards one client connection.
func (lb *LB) handle(client net.Conn) {
	defer lb.wg.Done()
	l, b := lb.connect(client)
	if l == nil {
		client.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pipe(l.server, l.forward, l)
	}()
	pipe(l.client, func() error {
		_, err := io.Copy(l.client, l.server)
		return err
	}, l)
	wg.Wait()
	l.close()

	lb.mu.Lock()
	delete(b.links, l)
	close(lb.ended)
	lb.ended = make(chan struct{})
	lb.mu.Unlock()
}

// connect dials the backends of the rotation, starting with the next one in
// turn, until one answers, and registers the link with it. It returns nil
// when none answers or the LB is closed.
func (lb *LB) connect(client net.Conn) (*link, *backend) {
	lb.mu.Lock()
	n := len(lb.rotation)
	candidates := make([]string, 0, n)
	for i := range n {
		candidates = append(candidates, lb.rotation[(lb.next+i)%n])
	}
	lb.next++
	lb.mu.Unlock()

	dialer := net.Dialer{Timeout: lb.dialTimeout}
	for _, addr := range candidates {
		server, err := dialer.DialContext(lb.ctx, "tcp", addr)

		lb.mu.Lock()
		b := lb.backends[addr]
		switch {
		case lb.closed:
			lb.mu.Unlock()
			if server != nil {
				server.Close()
			}
			return nil, nil
		case err != nil:
			b.dialFailures++
			b.lastDialErr = err.Error()
			lb.mu.Unlock()
			continue
		case !b.inRotation:
			// Removed while we dialled: no new connection may reach it.
			lb.mu.Unlock()
			server.Close()
			continue
		}
		l := newLink(client, server)
		b.links[l] = struct{}{}
		b.total++
		lb.mu.Unlock()
		return l, b
	}
	lb.mu.Lock()
	lb.refused++
	lb.mu.Unlock()
	return nil, nil
}

// pipe runs move, which copies one side of l to dst. When the source ends
// cleanly it half-closes dst, so the other direction can finish; when the
// copy fails it closes the whole link. What the server sends is copied by
// io.Copy (splice(2) between two TCP sockets); what the client sends by
// link.forward, which LB.Hold can stop.
func pipe(dst net.Conn, move func() error, l *link) {
	err := move()
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			if cw.CloseWrite() == nil {
				return
			}
		}
	}
	l.close()
}
