package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http/httputil"
	"slices"
	"strconv"
	"sync"
	"time"
)

// target is where a scenario's requests go.
type target struct {
	addr string      // host:port to dial
	host string      // Host header and SNI
	tls  *tls.Config // nil for plain HTTP
	path string
	size int // expected body length
}

// request returns the bytes of a GET of t, as a browser-less client sends it.
func (t target) request() []byte {
	return []byte("GET " + t.path + " HTTP/1.1\r\nHost: " + t.host + "\r\nUser-Agent: edgebench\r\nAccept: */*\r\n\r\n")
}

// conn is one keep-alive HTTP/1.1 connection of the load generator. It
// parses just enough of a response to find its end: status line, headers,
// a Content-Length or chunked body.
type conn struct {
	c  net.Conn
	br *bufio.Reader
}

func dial(ctx context.Context, t target) (*conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	if t.tls != nil {
		tc := tls.Client(c, t.tls)
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		c = tc
	}
	return &conn{c: c, br: bufio.NewReaderSize(c, 32<<10)}, nil
}

// openTimeout bounds the opening of a scenario's connections: a proxy
// that takes none in that time is not serving.
const openTimeout = 15 * time.Second

// errUnexpected is an answer that is not a 200 with the expected body.
var errUnexpected = errors.New("unexpected answer")

// do sends req and reads the answer, returning whether the server will
// close the connection after it.
func (c *conn) do(req []byte, wantSize int) (closing bool, err error) {
	if _, err := c.c.Write(req); err != nil {
		return true, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return true, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return true, fmt.Errorf("%w: status line %q", errUnexpected, line)
	}
	status, _ := strconv.Atoi(string(line[9:12]))
	size, chunked := -1, false
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			return true, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "content-length"):
			if size, err = strconv.Atoi(string(value)); err != nil {
				return true, fmt.Errorf("%w: Content-Length %q", errUnexpected, value)
			}
		case asciiEqualFold(name, "transfer-encoding"):
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "connection"):
			closing = asciiEqualFold(value, "close")
		}
	}
	var n int64
	switch {
	case chunked:
		n, err = io.Copy(io.Discard, httputil.NewChunkedReader(c.br))
		if err == nil {
			_, err = c.br.ReadSlice('\n') // the last chunk's (empty) trailer
		}
	case size >= 0:
		var d int
		d, err = c.br.Discard(size)
		n = int64(d)
	default:
		return true, fmt.Errorf("%w: neither Content-Length nor chunked", errUnexpected)
	}
	if err != nil {
		return true, err
	}
	if status != 200 || n != int64(wantSize) {
		return closing, fmt.Errorf("%w: status %d, %d body bytes", errUnexpected, status, n)
	}
	return closing, nil
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

func (c *conn) close() { _ = c.c.Close() }

// probe sends one request to t on a new connection.
func probe(ctx context.Context, t target) error {
	c, err := dial(ctx, t)
	if err != nil {
		return err
	}
	defer c.close()
	_ = c.c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = c.do(t.request(), t.size)
	return err
}

// measurement is one scenario's figures in one round.
type measurement struct {
	Requests int           `json:"requests"`
	Errors   int           `json:"errors"`
	RPS      float64       `json:"requestsPerSecond"`
	P50      time.Duration `json:"p50Ns"`
	P90      time.Duration `json:"p90Ns"`
	P99      time.Duration `json:"p99Ns"`
	Max      time.Duration `json:"maxNs"`
	// CPU is the CPU time each process used in the measured window per
	// request, in microseconds, by role: "proxy", "app", "load generator".
	CPU map[string]float64 `json:"cpuMicrosPerRequest,omitempty"`
	// Cores is the CPU the processes used together in the window, in cores;
	// what is left of the machine's went to other work.
	Cores float64 `json:"cores,omitempty"`
	// FirstError is the first error seen, for the report.
	FirstError string `json:"firstError,omitempty"`
}

// measure opens concurrency connections to t, sends requests on each one
// after another for warmup, then records every latency for duration.
// Requests that started before the window or ended after it are not counted.
// A connection that cannot be opened counts as an error and is tried again
// by its worker, as one that breaks is: one refused handshake does not end
// a run of many scenarios. When none opens within openTimeout the proxy is
// not serving, and measure fails. The CPU time of the processes in pids
// (by role) is read at the window's start and end.
func measure(ctx context.Context, t target, concurrency int, warmup, duration time.Duration, pids map[string]int) (measurement, error) {
	type worker struct {
		lat    []time.Duration
		errors int
		first  error
	}
	workers := make([]worker, concurrency)
	conns := make([]*conn, concurrency)
	opened := 0
	opening, cancel := context.WithTimeout(ctx, openTimeout)
	for i := range conns {
		c, err := dial(opening, t)
		if err != nil {
			workers[i].errors++
			workers[i].first = fmt.Errorf("connecting: %w", err)
			continue
		}
		conns[i] = c
		opened++
	}
	cancel()
	if err := ctx.Err(); err != nil || opened == 0 {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
		return measurement{}, cmpOr(err, workers[0].first)
	}
	req := t.request()
	from := time.Now().Add(warmup)
	until := from.Add(duration)
	cpu := make(chan map[string]time.Duration, 1)
	go func() {
		time.Sleep(time.Until(from))
		a := cpuTimes(pids)
		time.Sleep(time.Until(until))
		b := cpuTimes(pids)
		for role := range b {
			b[role] -= a[role]
		}
		cpu <- b
	}()

	var wg sync.WaitGroup
	for i := range concurrency {
		wg.Go(func() {
			w := &workers[i]
			w.lat = make([]time.Duration, 0, 1<<14)
			c := conns[i]
			defer func() {
				if c != nil {
					c.close()
				}
			}()
			for ctx.Err() == nil {
				if c == nil {
					var err error
					if c, err = dial(ctx, t); err != nil {
						if time.Now().After(until) {
							return
						}
						w.errors++
						w.first = cmpOr(w.first, err)
						time.Sleep(10 * time.Millisecond)
						continue
					}
				}
				_ = c.c.SetDeadline(until.Add(10 * time.Second))
				t0 := time.Now()
				if t0.After(until) {
					return
				}
				closing, err := c.do(req, t.size)
				t1 := time.Now()
				counted := !t0.Before(from) && !t1.After(until)
				if err != nil {
					if counted {
						w.errors++
						w.first = cmpOr(w.first, err)
					}
				} else if counted {
					w.lat = append(w.lat, t1.Sub(t0))
				}
				if closing || (err != nil && !errors.Is(err, errUnexpected)) {
					c.close()
					c = nil
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return measurement{}, err
	}

	var all []time.Duration
	m := measurement{}
	for _, w := range workers {
		all = append(all, w.lat...)
		m.Errors += w.errors
		if w.first != nil && m.FirstError == "" {
			m.FirstError = w.first.Error()
		}
	}
	slices.Sort(all)
	m.Requests = len(all)
	m.RPS = float64(len(all)) / duration.Seconds()
	m.P50, m.P90, m.P99 = quantile(all, 0.50), quantile(all, 0.90), quantile(all, 0.99)
	if len(all) > 0 {
		m.Max = all[len(all)-1]
	}
	if used := <-cpu; len(used) > 0 && len(all) > 0 {
		m.CPU = map[string]float64{}
		var total time.Duration
		for role, d := range used {
			m.CPU[role] = float64(d.Microseconds()) / float64(len(all))
			total += d
		}
		m.Cores = total.Seconds() / duration.Seconds()
	}
	return m, nil
}

// cpuTimes returns the CPU time of each process in pids that can be read;
// a proxy's includes its descendants (nginx's workers).
func cpuTimes(pids map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for role, pid := range pids {
		read := cpuTime
		if role == roleProxy {
			read = treeCPUTime
		}
		if d, ok := read(pid); ok {
			out[role] = d
		}
	}
	return out
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// quantile returns the q-quantile of sorted (nearest rank), 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
