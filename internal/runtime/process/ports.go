package process

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Default range of web instances' ports: below Linux's default ephemeral
// range (32768-60999), from which outgoing connections and ":0" listeners
// take theirs.
const (
	defaultFirstPort = 20000
	defaultLastPort  = 29999
)

// ports hands out web instances' ports from a fixed range. A port is taken
// only when nothing listens on it on any address (apps commonly bind every
// address, as ":$PORT" does) and is held until its instance is gone, so
// that a crashed instance restarts on the port it had.
type ports struct {
	first, last int

	mu   sync.Mutex
	next int
	held map[int]bool
}

// newPorts starts the walk at a random port of the range: two drivers on
// one machine (two platforms, or the test binaries of a test run) that
// started from the same port would probe it free at the same moment and
// both hand it out, and the second instance would fail to bind.
func newPorts(first, last int) *ports {
	return &ports{first: first, last: last, next: first + rand.IntN(last-first+1), held: map[int]bool{}}
}

// take returns a port that was free on every address a moment ago; the
// range is walked round-robin so that a port just given back is the last
// to be handed out again.
func (p *ports) take() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.last - p.first + 1
	for range n {
		port := p.next
		if p.next++; p.next > p.last {
			p.next = p.first
		}
		if p.held[port] || !freeEverywhere(port) {
			continue
		}
		p.held[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d: every port is held by an instance or in use by another program; widen the range (process.Options.FirstPort, LastPort)", p.first, p.last)
}

func (p *ports) give(port int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.held, port)
}

// freeEverywhere reports whether port can be bound on the wildcard
// address, which fails when any address of the machine has it in use.
func freeEverywhere(port int) bool {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
