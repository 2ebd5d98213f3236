package gitserver

import (
	"net"
	"sync"
	"time"

	"bex.co/bex/internal/httpserve"
)

// HTTPTimeouts are the smart-HTTP server's limits:
//   - ReadHeader 10 s: git sends its headers at once; a client dripping
//     them is an attack (slow loris).
//   - Read 15 min: the whole request, pack included; a push of
//     DefaultMaxPushBytes (200 MiB) needs about 230 KiB/s to make it.
//   - Write none: receive-pack's answer carries the build's output on the
//     side-band for as long as the build runs (build.DefaultTimeout, 15
//     min, then the rollout), with keep-alive packets in its silences;
//     upload-pack's answer is a pack as large as the repository. A client
//     that goes away ends both (the request's context).
//   - Idle 120 s: a kept-alive connection between git's requests, which
//     follow each other at once.
func HTTPTimeouts() httpserve.Timeouts {
	return httpserve.Timeouts{
		ReadHeader: 10 * time.Second,
		Read:       15 * time.Minute,
		Idle:       120 * time.Second,
	}
}

// SSHLimits bound SSH connections.
type SSHLimits struct {
	// Handshake bounds the key exchange and authentication: a client that
	// connects and says nothing, or stops halfway, is disconnected.
	Handshake time.Duration
	// Idle closes a connection on which nothing was read or written for
	// that long. A push's build output, and its side-band keep-alive
	// packets every few seconds, count as traffic.
	Idle time.Duration
}

// SSHTimeouts are the SSH server's defaults: 30 s to authenticate (git
// does it in well under a second, ssh-agent prompts included), and 5
// minutes of silence.
func SSHTimeouts() SSHLimits {
	return SSHLimits{Handshake: 30 * time.Second, Idle: 5 * time.Minute}
}

func (l SSHLimits) withDefaults() SSHLimits {
	d := SSHTimeouts()
	if l.Handshake <= 0 {
		l.Handshake = d.Handshake
	}
	if l.Idle <= 0 {
		l.Idle = d.Idle
	}
	return l
}

// idleConn closes its connection once nothing was read or written on it
// for idle. It does not use the connection's deadlines, which the SSH
// handshake sets for itself.
type idleConn struct {
	net.Conn
	idle time.Duration

	mu    sync.Mutex
	last  time.Time
	timer *time.Timer
}

func newIdleConn(c net.Conn, idle time.Duration) *idleConn {
	ic := &idleConn{Conn: c, idle: idle, last: time.Now()}
	ic.timer = time.AfterFunc(idle, ic.check)
	return ic
}

// check closes the connection when it has been idle long enough, and
// looks again when it would be otherwise.
func (c *idleConn) check() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if left := c.idle - time.Since(c.last); left > 0 {
		c.timer.Reset(left)
		return
	}
	_ = c.Conn.Close()
}

func (c *idleConn) touch() {
	c.mu.Lock()
	c.last = time.Now()
	c.mu.Unlock()
}

func (c *idleConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *idleConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.touch()
	}
	return n, err
}

// Close stops the timer and closes the connection.
func (c *idleConn) Close() error {
	c.timer.Stop()
	return c.Conn.Close()
}
