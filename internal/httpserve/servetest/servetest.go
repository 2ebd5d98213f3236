package servetest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// drip is how often the slow client sends one more header line.
const drip = 50 * time.Millisecond

// DropsSlowLoris connects to addr and starts a request whose headers never
// end, one more line every 50 ms; it fails t unless the server closes the
// connection within wait.
func DropsSlowLoris(t testing.TB, addr string, wait time.Duration) {
	t.Helper()
	conn, closed := dial(t, addr)
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: slow.test\r\n"); err != nil {
		t.Fatalf("writing the request line: %v", err)
	}
	tick := time.NewTicker(drip)
	defer tick.Stop()
	deadline := time.After(wait)
	for i := 0; ; i++ {
		select {
		case <-closed:
			return
		case <-tick.C:
			if _, err := fmt.Fprintf(conn, "X-Drip-%d: a\r\n", i); err != nil {
				return // the server hung up
			}
		case <-deadline:
			t.Fatalf("%s still holds a connection whose headers have dripped for %s", addr, wait)
		}
	}
}

// DropsIdle sends one complete GET of path to addr, reads the answer, and
// fails t unless the server then closes the kept-alive connection within
// wait.
func DropsIdle(t testing.TB, addr, path string, wait time.Duration) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: idle.test\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer to GET %s: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.Close {
		t.Fatalf("GET %s answered Connection: close; want a kept-alive connection to test", path)
	}
	// The server hangs up: the next read ends, with EOF or a reset, before
	// the deadline.
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	if _, err := br.ReadByte(); err == nil {
		t.Fatalf("%s sent more after the answer", addr)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s still holds an idle kept-alive connection after %s", addr, wait)
	}
}

// dial connects to addr; closed is closed once the server hangs up.
func dial(t testing.TB, addr string) (net.Conn, <-chan struct{}) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, conn)
	}()
	return conn, closed
}
