package gitserver

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"bex.co/bex/internal/httpserve"
	"bex.co/bex/internal/httpserve/servetest"
)

// serveHTTP serves h on a loopback port with t's timeouts until the test
// ends, and returns the address.
func serveHTTP(tb testing.TB, t httpserve.Timeouts, h http.Handler) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := t.Server(h)
	go func() { _ = srv.Serve(l) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// TestSlowClientsAreDisconnected: with the receiver's timeouts shortened,
// a smart-HTTP client dripping its headers, an idle kept-alive HTTP
// connection and an SSH client that never starts its handshake are all
// hung up on.
func TestSlowClientsAreDisconnected(t *testing.T) {
	tm := HTTPTimeouts()
	if tm.ReadHeader <= 0 || tm.Read <= 0 || tm.Idle <= 0 {
		t.Errorf("HTTPTimeouts() = %+v, want header, read and idle limits", tm)
	}
	if d := SSHTimeouts(); d.Handshake <= 0 || d.Idle <= 0 {
		t.Errorf("SSHTimeouts() = %+v, want both limits", d)
	}
	e := newEnv(t, func(o *Options) { o.SSH = SSHLimits{Handshake: 300 * time.Millisecond, Idle: time.Minute} })
	tm.ReadHeader, tm.Idle = 300*time.Millisecond, 300*time.Millisecond
	addr := serveHTTP(t, tm, e.srv.HTTPHandler())

	t.Run("loris", func(t *testing.T) { servetest.DropsSlowLoris(t, addr, 20*time.Second) })
	t.Run("idle", func(t *testing.T) { servetest.DropsIdle(t, addr, "/acme/web.git/info/refs", 20*time.Second) })

	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", e.sshPort))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Read the server's version line, then say nothing: the server must
	// hang up.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 4096)
	for {
		if _, err := conn.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the SSH server still holds a connection that never began its handshake after 20s")
			}
			return
		}
	}
}

// TestIdleConnCloses: an SSH connection on which nothing moves is closed;
// one that keeps talking is not.
func TestIdleConnCloses(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	ic := newIdleConn(server, 300*time.Millisecond)
	defer ic.Close()
	// Traffic for longer than the idle limit keeps it open.
	go func() { _, _ = io.Copy(ic, ic) }() // echo
	start := time.Now()
	buf := make([]byte, 1)
	for time.Since(start) < 3*ic.idle {
		if _, err := client.Write([]byte("x")); err != nil {
			t.Fatalf("a talking connection was closed after %s: %v", time.Since(start), err)
		}
		if _, err := client.Read(buf); err != nil {
			t.Fatalf("a talking connection was closed after %s: %v", time.Since(start), err)
		}
	}
	// Silence closes it.
	_ = client.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := client.Read(buf); err == nil {
		t.Fatal("read data from a silent connection")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a silent connection was still open after 20s")
	}
}
