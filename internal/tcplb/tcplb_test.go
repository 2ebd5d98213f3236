package tcplb_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"bex.co/bex/internal/tcplb"
	"bex.co/bex/test/platformtest"
)

// backend is a real TCP server that greets each connection with its name on
// a line, then echoes what it reads until the client half-closes.
type backend struct {
	name string
	ln   net.Listener
	mu   sync.Mutex
	open map[net.Conn]bool
}

func startBackend(t *testing.T, name string) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: name, ln: ln, open: map[net.Conn]bool{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.open[c] = true
			b.mu.Unlock()
			go func() {
				defer func() {
					b.mu.Lock()
					delete(b.open, c)
					b.mu.Unlock()
					c.Close()
				}()
				if _, err := io.WriteString(c, name+"\n"); err != nil {
					return
				}
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(b.stop)
	return b
}

func (b *backend) addr() string { return b.ln.Addr().String() }

// stop closes the listener and every open connection, as a process that
// dies.
func (b *backend) stop() {
	b.ln.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.open {
		c.Close()
	}
}

// deadAddr returns an address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func listen(t *testing.T, backends ...string) *tcplb.LB {
	t.Helper()
	lb, err := tcplb.Listen("127.0.0.1:0", tcplb.Options{}, backends...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	return lb
}

// client is one connection through the LB.
type client struct {
	net.Conn
	r *bufio.Reader
}

// connect opens a connection through lb and returns it with the name of the
// backend that answered.
func connect(t *testing.T, lb *tcplb.LB) (*client, string) {
	t.Helper()
	c, err := net.Dial("tcp", lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	cl := &client{Conn: c, r: bufio.NewReader(c)}
	name, err := cl.r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the backend's greeting through the LB: %v", err)
	}
	return cl, strings.TrimSuffix(name, "\n")
}

// roundTrip sends a line and reads it back.
func (c *client) roundTrip(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("writing through the LB: %v", err)
	}
	got, err := c.r.ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("echo through the LB: got %q, %v; want %q", got, err, line)
	}
}

// idle says why the LB still holds connections to addr, if it does.
func idle(t *testing.T, lb *tcplb.LB, addr string) error {
	if n := stats(t, lb, addr).Active; n != 0 {
		return fmt.Errorf("%d active connections", n)
	}
	return nil
}

func stats(t *testing.T, lb *tcplb.LB, addr string) tcplb.BackendStats {
	t.Helper()
	s, ok := lb.Stats().Backend(addr)
	if !ok {
		t.Fatalf("no stats for %s", addr)
	}
	return s
}

// TestRoundRobin shows that connections go to the backends in turn and are
// counted per backend, open and in total.
func TestRoundRobin(t *testing.T) {
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	lb := listen(t, a.addr(), b.addr(), c.addr())

	var names []string
	var clients []*client
	for range 6 {
		cl, name := connect(t, lb)
		names = append(names, name)
		clients = append(clients, cl)
	}
	if got, want := strings.Join(names, ""), "abcabc"; got != want {
		t.Fatalf("backends in connection order = %q, want %q", got, want)
	}
	for _, be := range []*backend{a, b, c} {
		if s := stats(t, lb, be.addr()); s.Total != 2 || s.Active != 2 || !s.InRotation {
			t.Fatalf("stats of %s = %+v, want 2 total, 2 active, in rotation", be.name, s)
		}
	}
	for _, cl := range clients {
		cl.Close()
	}
	platformtest.Eventually(t, 10*time.Second, "every connection to end", func(context.Context) error {
		for _, s := range lb.Stats().Backends {
			if s.Active != 0 {
				return fmt.Errorf("%s has %d active connections", s.Addr, s.Active)
			}
		}
		return nil
	})
	if s := lb.Stats(); s.Accepted != 6 || s.Refused != 0 {
		t.Fatalf("accepted %d, refused %d; want 6 and 0", s.Accepted, s.Refused)
	}
}

// TestForwardsBothWaysAndHalfClose shows that bytes flow both ways and that
// a client's half-close reaches the backend, whose reply still comes back.
func TestForwardsBothWaysAndHalfClose(t *testing.T) {
	a := startBackend(t, "a")
	lb := listen(t, a.addr())
	cl, _ := connect(t, lb)
	cl.roundTrip(t, "hello")
	if _, err := io.WriteString(cl, "last words"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The backend echoes until it reads EOF, then closes: the client reads
	// the echo and then EOF.
	rest, err := io.ReadAll(cl.r)
	if err != nil {
		t.Fatalf("reading after half-close: %v", err)
	}
	if string(rest) != "last words" {
		t.Fatalf("after half-close got %q, want %q", rest, "last words")
	}
	platformtest.Eventually(t, 10*time.Second, "the link to close", func(context.Context) error { return idle(t, lb, a.addr()) })
}

// TestTLSPassesThrough shows that the LB does not touch TLS: the client
// verifies the backend's own certificate through it.
func TestTLSPassesThrough(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "behind the LB")
	}))
	defer srv.Close()
	lb := listen(t, srv.Listener.Addr().String())

	resp, err := srv.Client().Get("https://" + lb.Addr() + "/")
	if err != nil {
		t.Fatalf("HTTPS through the LB: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "behind the LB" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if !resp.TLS.PeerCertificates[0].Equal(srv.Certificate()) {
		t.Fatal("the client saw a certificate other than the backend's")
	}
}

// TestDeadBackendIsSkipped shows the passive health rule: a backend whose
// dial fails is skipped for that connection and the next one answers, so no
// connection fails while one backend is alive; with none alive the client is
// closed at once.
func TestDeadBackendIsSkipped(t *testing.T) {
	a, b := startBackend(t, "a"), startBackend(t, "b")
	dead := deadAddr(t)
	lb := listen(t, a.addr(), dead, b.addr())

	seen := map[string]int{}
	for range 6 {
		cl, name := connect(t, lb)
		seen[name]++
		cl.Close()
	}
	if seen["a"]+seen["b"] != 6 {
		t.Fatalf("connections per backend = %v, want all 6 on a and b", seen)
	}
	s := stats(t, lb, dead)
	if s.Total != 0 || s.DialFailures == 0 || s.LastDialError == "" || !s.InRotation {
		t.Fatalf("stats of the dead backend = %+v, want no connection, dial failures with an error, still in rotation", s)
	}
	if lb.Stats().Refused != 0 {
		t.Fatalf("refused %d connections with a live backend", lb.Stats().Refused)
	}

	// A backend that dies while in the rotation is skipped the same way.
	a.stop()
	b.stop()
	c, err := net.Dial("tcp", lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read with every backend dead: %d bytes, %v; want EOF", n, err)
	}
	if got := lb.Stats().Refused; got != 1 {
		t.Fatalf("refused = %d, want 1", got)
	}
}

// TestRemoveDrains shows that Remove stops new connections to the backend at
// once while its open connection goes on working until the client closes it.
func TestRemoveDrains(t *testing.T) {
	a, b := startBackend(t, "a"), startBackend(t, "b")
	lb := listen(t, a.addr(), b.addr())
	old, name := connect(t, lb)
	if name != "a" {
		t.Fatalf("first connection went to %s, want a", name)
	}
	if !lb.Remove(a.addr()) {
		t.Fatal("Remove(a) = false, want true")
	}
	if lb.Remove(a.addr()) {
		t.Fatal("second Remove(a) = true, want false")
	}
	for range 4 {
		cl, name := connect(t, lb)
		if name != "b" {
			t.Fatalf("a new connection went to %s after a was removed", name)
		}
		cl.Close()
	}
	old.roundTrip(t, "still here")
	if s := stats(t, lb, a.addr()); s.InRotation || s.Active != 1 || s.Total != 1 {
		t.Fatalf("stats of the removed backend = %+v, want out of rotation, 1 active, 1 total", s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := lb.WaitDrained(ctx, a.addr()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitDrained with a connection open = %v, want deadline exceeded", err)
	}

	old.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lb.WaitDrained(ctx, a.addr()); err != nil {
		t.Fatalf("WaitDrained after the client closed: %v", err)
	}
	if s := stats(t, lb, a.addr()); s.Active != 0 {
		t.Fatalf("active connections after the drain = %d", s.Active)
	}
}

// TestDrainDeadlineClosesConnections shows the drain with a deadline: once
// it passes, CloseConns ends the removed backend's connections, and the
// client sees its connection closed.
func TestDrainDeadlineClosesConnections(t *testing.T) {
	a, b := startBackend(t, "a"), startBackend(t, "b")
	lb := listen(t, a.addr(), b.addr())
	old, _ := connect(t, lb)
	lb.Remove(a.addr())

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := lb.WaitDrained(ctx, a.addr()); err == nil {
		t.Fatal("WaitDrained returned nil with a connection open")
	}
	if n := lb.CloseConns(a.addr()); n != 1 {
		t.Fatalf("CloseConns closed %d connections, want 1", n)
	}
	if _, err := old.r.ReadString('\n'); err == nil {
		t.Fatal("the client's connection still reads after its backend's drain deadline")
	}
	platformtest.Eventually(t, 10*time.Second, "the removed backend to have no connection", func(context.Context) error { return idle(t, lb, a.addr()) })
	// The other backend is untouched.
	cl, name := connect(t, lb)
	if name != "b" {
		t.Fatalf("new connection went to %s, want b", name)
	}
	cl.roundTrip(t, "fine")
}

// TestSetBackendsAndAdd shows changes of the rotation at runtime.
func TestSetBackendsAndAdd(t *testing.T) {
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	lb := listen(t)

	names := func(n int) string {
		var s []string
		for range n {
			cl, name := connect(t, lb)
			cl.Close()
			s = append(s, name)
		}
		return strings.Join(s, "")
	}
	lb.SetBackends(a.addr())
	if got := names(2); got != "aa" {
		t.Fatalf("with a only: %q", got)
	}
	lb.SetBackends(b.addr(), c.addr(), b.addr())
	if got := lb.Backends(); len(got) != 2 {
		t.Fatalf("Backends() = %v, want b and c once each", got)
	}
	if got := names(4); strings.Count(got, "b") != 2 || strings.Count(got, "c") != 2 {
		t.Fatalf("with b and c: %q", got)
	}
	if s := stats(t, lb, a.addr()); s.InRotation {
		t.Fatal("a is still in rotation after SetBackends left it out")
	}
	lb.Add(a.addr())
	lb.Add(a.addr())
	if got := lb.Backends(); len(got) != 3 || got[2] != a.addr() {
		t.Fatalf("Backends() after adding a twice = %v, want b, c, a", got)
	}
	if got := names(3); strings.Count(got, "a") != 1 {
		t.Fatalf("with b, c, a: %q", got)
	}
	if lb.Remove(deadAddr(t)) {
		t.Fatal("Remove of an unknown backend = true")
	}
}

// TestNoBackendRefuses shows that with an empty rotation a client is closed
// at once rather than left hanging.
func TestNoBackendRefuses(t *testing.T) {
	lb := listen(t)
	c, err := net.Dial("tcp", lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read with no backend: %v, want EOF", err)
	}
	platformtest.Eventually(t, 10*time.Second, "the refusal to be counted", func(context.Context) error {
		if n := lb.Stats().Refused; n != 1 {
			return fmt.Errorf("%d refused", n)
		}
		return nil
	})
}

// TestCloseEndsEverything shows that Close ends open connections and stops
// listening.
func TestCloseEndsEverything(t *testing.T) {
	a := startBackend(t, "a")
	lb := listen(t, a.addr())
	cl, _ := connect(t, lb)
	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.r.ReadString('\n'); err == nil {
		t.Fatal("a connection still reads after Close")
	}
	if c, err := net.Dial("tcp", lb.Addr()); err == nil {
		c.Close()
		t.Fatal("the LB still accepts after Close")
	}
	if s := stats(t, lb, a.addr()); s.Active != 0 {
		t.Fatalf("active connections after Close = %d", s.Active)
	}
	if err := lb.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// heldPair is a connection through the LB to a bare listener: the client's
// end and the backend's.
func heldPair(t *testing.T) (lb *tcplb.LB, addr string, cl, srv net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	lb = listen(t, ln.Addr().String())
	cl, err = net.Dial("tcp", lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	if srv, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cl.SetDeadline(time.Now().Add(10 * time.Second))
	srv.SetDeadline(time.Now().Add(10 * time.Second))
	// The LB registers the connection after its dial, which the backend
	// may accept first; bytes that pass show it is registered.
	io.WriteString(cl, "before;")
	if got := readN(t, srv, 7); got != "before;" {
		t.Fatalf("backend read %q before Hold, want %q", got, "before;")
	}
	return lb, ln.Addr().String(), cl, srv
}

func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return string(buf)
}

// TestHoldKeepsWhatClientsSend shows Hold: what the client sends after it
// does not reach the backend until release, while what the backend sends
// still reaches the client; released, it arrives whole and in order.
func TestHoldKeepsWhatClientsSend(t *testing.T) {
	lb, addr, cl, srv := heldPair(t)
	n, release := lb.Hold(addr)
	if n != 1 {
		t.Fatalf("Hold held %d connections, want 1", n)
	}
	if _, err := io.WriteString(cl, "held;"); err != nil {
		t.Fatal(err)
	}
	// What the backend sends passes while the client's bytes wait.
	io.WriteString(srv, "answer")
	if got := readN(t, cl, 6); got != "answer" {
		t.Fatalf("client read %q while held, want %q", got, "answer")
	}
	srv.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 16)
	if n, err := srv.Read(buf); err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("backend read %q (%v) while the connection was held, want nothing", buf[:n], err)
	}
	io.WriteString(cl, "more;")

	release()
	release()
	srv.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got := readN(t, srv, 10); got != "held;more;" {
		t.Fatalf("backend read %q after release, want %q", got, "held;more;")
	}
	io.WriteString(cl, "after")
	if got := readN(t, srv, 5); got != "after" {
		t.Fatalf("backend read %q after release, want %q", got, "after")
	}
}

// TestCloseConnsEndsAHeldConnection shows that a held connection with
// bytes waiting still ends when its drain deadline passes: nothing of the
// LB stays behind for a release that never comes.
func TestCloseConnsEndsAHeldConnection(t *testing.T) {
	lb, addr, cl, srv := heldPair(t)
	_, release := lb.Hold(addr)
	defer release()
	io.WriteString(cl, "waiting")
	lb.Remove(addr)
	if n := lb.CloseConns(addr); n != 1 {
		t.Fatalf("CloseConns closed %d connections, want 1", n)
	}
	if _, err := cl.Read(make([]byte, 1)); err == nil {
		t.Fatal("the client's held connection still reads after CloseConns")
	}
	if n, err := srv.Read(make([]byte, 16)); err == nil {
		t.Fatalf("the backend read %d bytes of a held connection that was closed", n)
	}
	platformtest.Eventually(t, 10*time.Second, "the held connection to end", func(context.Context) error { return idle(t, lb, addr) })
}
