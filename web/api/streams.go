package api

import (
	"net/http"
	"strconv"
	"sync"
)

// DefaultMaxLogStreamsPerTenant is how many logs one tenant may follow at
// once through one API server when Options do not say.
const DefaultMaxLogStreamsPerTenant = 20

// streamLimiter counts the log streams each tenant follows.
type streamLimiter struct {
	max int

	mu sync.Mutex
	n  map[string]int
}

func newStreamLimiter(maxStreams int) *streamLimiter {
	return &streamLimiter{max: maxStreams, n: map[string]int{}}
}

// start counts one more stream of tenant and returns its end; past the cap
// it answers 429 and counts nothing.
func (l *streamLimiter) start(tenant string) (end func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[tenant] >= l.max {
		return nil, &httpError{status: http.StatusTooManyRequests, message: "too many log streams: a tenant may follow at most " +
			strconv.Itoa(l.max) + " logs at once (the operator's --max-log-streams-per-tenant); stop following one and try again"}
	}
	l.n[tenant]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.n[tenant]--; l.n[tenant] == 0 {
				delete(l.n, tenant)
			}
		})
	}, nil
}
