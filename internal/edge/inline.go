package edge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// inlineTransport sends a request that has no body and asks for no protocol
// upgrade over a pooled HTTP/1.1 connection on the caller's goroutine:
// it writes the request and reads the response head itself, and the
// response body reads straight from the connection. http.Transport hands
// every request to two goroutines of the connection (one writes, one reads)
// and back over channels; for the small GETs that make most of an app's
// traffic, those hand-offs and wake-ups cost more CPU than the proxying.
// Every other request (one with a body, an upgrade, a CONNECT) goes to
// fallback, which streams both ways at once.
//
// A connection goes back to the pool when its response body was read to
// the end and neither side asked to close it; otherwise it is closed. A
// pooled connection that the upstream closed meanwhile is found when the
// response head cannot be read; the request is then sent once more on a
// new connection, since nothing of an answer was received and the request
// had no body.
type inlineTransport struct {
	fallback    http.RoundTripper
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int // per upstream
	idleTimeout time.Duration
	// headerTimeout bounds the wait for a response head; 0 waits as long
	// as the request's context lives.
	headerTimeout time.Duration

	mu   sync.Mutex
	idle map[string][]*upstreamConn // by address, most recently used last
	// sweep closes connections idle too long, also of upstreams that get no
	// more requests (a release's old instances); it is set while any
	// connection is idle.
	sweep *time.Timer
}

// upstreamConn is a pooled connection with its buffers.
type upstreamConn struct {
	addr      string
	conn      net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

func newInlineTransport(fallback http.RoundTripper, dial func(context.Context, string, string) (net.Conn, error)) *inlineTransport {
	return &inlineTransport{
		fallback: fallback, dial: dial, maxIdle: 64, idleTimeout: 90 * time.Second,
		idle: map[string][]*upstreamConn{},
	}
}

// inlinable says whether req can take the inline path.
func inlinable(req *http.Request) bool {
	return req.URL.Scheme == "http" && req.Method != http.MethodConnect &&
		(req.Body == nil || req.Body == http.NoBody) && req.ContentLength == 0 &&
		req.Header.Get("Upgrade") == "" && len(req.TransferEncoding) == 0
}

// RoundTrip implements http.RoundTripper.
func (t *inlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !inlinable(req) {
		return t.fallback.RoundTrip(req)
	}
	addr := req.URL.Host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "80")
	}
	for attempt := 0; ; attempt++ {
		uc, reused := t.get(addr)
		if uc == nil {
			c, err := t.dial(req.Context(), "tcp", addr)
			if err != nil {
				return nil, err
			}
			uc = &upstreamConn{addr: addr, conn: c, br: bufio.NewReaderSize(c, 4<<10), bw: bufio.NewWriterSize(c, 4<<10)}
		}
		resp, err := t.exchange(req, uc)
		if err == nil {
			return resp, nil
		}
		uc.conn.Close()
		// A pooled connection the upstream closed since: nothing was
		// answered and the request has no body, so an idempotent one is
		// sent again on a new connection, as http.Transport does.
		if reused && attempt == 0 && idempotent(req.Method) && req.Context().Err() == nil && errors.Is(err, errStale) {
			continue
		}
		return nil, err
	}
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// errStale is a connection that failed before a byte of the response head
// was read.
var errStale = errors.New("the connection ended before a response")

// exchange writes req on uc and reads the response head; the response body
// reads from uc and gives it back to the pool at its end.
func (t *inlineTransport) exchange(req *http.Request, uc *upstreamConn) (*http.Response, error) {
	ctx := req.Context()
	// A cancelled request or a late answer unblocks the reads and writes.
	stop := context.AfterFunc(ctx, func() { _ = uc.conn.SetDeadline(time.Unix(1, 0)) })
	if t.headerTimeout > 0 {
		_ = uc.conn.SetDeadline(time.Now().Add(t.headerTimeout))
	}
	fail := func(err error) (*http.Response, error) {
		stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	err := req.Write(uc.bw)
	if err == nil {
		err = uc.bw.Flush()
	}
	if err != nil {
		return fail(fmt.Errorf("writing the request: %w: %w", errStale, err))
	}
	var resp *http.Response
	for {
		if _, err := uc.br.Peek(1); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
				return fail(errStale)
			}
			return fail(fmt.Errorf("reading the response: %w", err))
		}
		r, err := http.ReadResponse(uc.br, req)
		if err != nil {
			return fail(fmt.Errorf("reading the response: %w", err))
		}
		// 1xx answers other than 101 come before the final one.
		if r.StatusCode >= 200 || r.StatusCode == http.StatusSwitchingProtocols {
			resp = r
			break
		}
	}
	_ = uc.conn.SetDeadline(time.Time{})
	resp.Body = &inlineBody{ReadCloser: resp.Body, t: t, uc: uc, stop: stop, reuse: !resp.Close && !req.Close,
		eof: resp.Body == http.NoBody || resp.ContentLength == 0}
	return resp, nil
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "read" || op.Op == "write") && !op.Timeout()
}

// inlineBody is a response body; at its end the connection goes back to
// the pool, on an early Close it is closed.
type inlineBody struct {
	io.ReadCloser
	t     *inlineTransport
	uc    *upstreamConn
	stop  func() bool
	reuse bool
	eof   bool
	done  bool
}

func (b *inlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *inlineBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	// stop is false when the context's deadline was set on the connection
	// already: it cannot be trusted again.
	if stopped := b.stop(); !stopped || !b.eof || !b.reuse {
		// Closing the connection first keeps the body's Close from reading
		// the rest of an answer nobody wants.
		b.uc.conn.Close()
		_ = b.ReadCloser.Close()
		return nil
	}
	if err := b.ReadCloser.Close(); err != nil || b.uc.br.Buffered() > 0 {
		b.uc.conn.Close()
		return err
	}
	b.t.put(b.uc)
	return nil
}

// get takes the most recently used idle connection to addr that has not
// been idle too long; reused is false when there is none.
func (t *inlineTransport) get(addr string) (uc *upstreamConn, reused bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	conns := t.idle[addr]
	for len(conns) > 0 {
		uc = conns[len(conns)-1]
		conns = conns[:len(conns)-1]
		if time.Since(uc.idleSince) < t.idleTimeout {
			t.setIdle(addr, conns)
			return uc, true
		}
		uc.conn.Close()
	}
	t.setIdle(addr, conns)
	return nil, false
}

// put returns uc to the pool, closing the oldest idle connection of its
// upstream past maxIdle and those idle too long.
func (t *inlineTransport) put(uc *upstreamConn) {
	now := time.Now()
	uc.idleSince = now
	t.mu.Lock()
	defer t.mu.Unlock()
	conns := t.idle[uc.addr]
	for len(conns) > 0 && (len(conns) >= t.maxIdle || now.Sub(conns[0].idleSince) >= t.idleTimeout) {
		conns[0].conn.Close()
		conns = conns[1:]
	}
	t.setIdle(uc.addr, append(conns, uc))
	if t.sweep == nil {
		t.sweep = time.AfterFunc(t.idleTimeout, t.closeIdle)
	}
}

// closeIdle closes the connections idle for idleTimeout, and runs again
// while any stays idle.
func (t *inlineTransport) closeIdle() {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for addr, conns := range t.idle {
		for len(conns) > 0 && now.Sub(conns[0].idleSince) >= t.idleTimeout {
			conns[0].conn.Close()
			conns = conns[1:]
		}
		t.setIdle(addr, conns)
	}
	t.sweep = nil
	if len(t.idle) > 0 {
		t.sweep = time.AfterFunc(t.idleTimeout/2, t.closeIdle)
	}
}

func (t *inlineTransport) setIdle(addr string, conns []*upstreamConn) {
	if len(conns) == 0 {
		delete(t.idle, addr)
		return
	}
	t.idle[addr] = conns
}
