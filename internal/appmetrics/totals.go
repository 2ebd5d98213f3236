package appmetrics

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultTotalsIdle is how long Totals keeps an app that had no request:
// far more than a reader's Interval, so that a reader sees every count
// before the app is forgotten.
const DefaultTotalsIdle = time.Hour

// Totals counts, since the process started, each app's requests as an edge
// in a process of its own (bex-edge) served them: requests, 5xx and the
// Sampler's latency buckets, cumulative like Prometheus counters, so that
// any number of readers (EdgeReader, one per bex-web replica) each take
// their own per-interval differences without resetting anything.
//
// Memory is bounded: at most MaxApps apps (requests for more are not
// counted), each a fixed array of buckets; an app without a request for
// Idle is forgotten at the next Snapshot (a reader then takes the app's
// next counts as new). Its methods are safe for concurrent use; Observe
// only takes a lock.
type Totals struct {
	boot    string
	started time.Time
	maxApps int
	idle    time.Duration

	mu   sync.Mutex
	apps map[Key]*appTotals
}

type appTotals struct {
	histogram
	last time.Time
}

// NewTotals returns empty totals of at most maxApps apps
// [DefaultMaxApps], forgetting apps idle for idle [DefaultTotalsIdle].
func NewTotals(maxApps int, idle time.Duration) *Totals {
	if maxApps <= 0 {
		maxApps = DefaultMaxApps
	}
	if idle <= 0 {
		idle = DefaultTotalsIdle
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return &Totals{boot: hex.EncodeToString(b), started: time.Now(), maxApps: maxApps, idle: idle, apps: map[Key]*appTotals{}}
}

// Observe counts one request served for an app.
func (t *Totals) Observe(tenant, app string, status int, d time.Duration) {
	k := Key{tenant, app}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.apps[k]
	if a == nil {
		if len(t.apps) >= t.maxApps {
			return
		}
		a = &appTotals{}
		t.apps[k] = a
	}
	a.observe(status, d)
	a.last = now
}

// TotalsSnapshot is what Totals serves (GET, JSON): Boot names this run of
// the process (a reader that sees another Boot at the same address takes
// every count as new), Started is when it began.
type TotalsSnapshot struct {
	Boot    string      `json:"boot"`
	Started time.Time   `json:"started"`
	Apps    []AppTotals `json:"apps"`
}

// AppTotals are one app's counts since Started. Buckets are the non-zero
// latency buckets, as pairs of the bucket's index (0 to 55, the Sampler's
// buckets: docs/metrics.md) and its count.
type AppTotals struct {
	Tenant   string      `json:"tenant"`
	App      string      `json:"app"`
	Requests uint64      `json:"requests"`
	Errors   uint64      `json:"errors"`
	Buckets  [][2]uint64 `json:"buckets"`
}

// Snapshot returns every app's counts, sorted by tenant and app, and
// forgets the apps idle for longer than the idle time.
func (t *Totals) Snapshot(now time.Time) TotalsSnapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := TotalsSnapshot{Boot: t.boot, Started: t.started, Apps: make([]AppTotals, 0, len(t.apps))}
	for k, a := range t.apps {
		if now.Sub(a.last) > t.idle {
			delete(t.apps, k)
			continue
		}
		at := AppTotals{Tenant: k.Tenant, App: k.App, Requests: a.requests, Errors: a.errors}
		for i, c := range a.buckets {
			if c > 0 {
				at.Buckets = append(at.Buckets, [2]uint64{uint64(i), c})
			}
		}
		out.Apps = append(out.Apps, at)
	}
	sort.Slice(out.Apps, func(i, j int) bool {
		if out.Apps[i].Tenant != out.Apps[j].Tenant {
			return out.Apps[i].Tenant < out.Apps[j].Tenant
		}
		return out.Apps[i].App < out.Apps[j].App
	})
	return out
}

// ServeHTTP answers GET with the Snapshot as JSON. It checks no
// credential: the command serves it behind one (bex-edge's
// --app-metrics-token-file), since it holds every tenant's traffic.
func (t *Totals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(t.Snapshot(time.Now()))
}

// ReadToken reads the token that guards the edges' Totals from path (the
// same Secret in bex-edge and bex-web): its content less surrounding
// white space, at least 16 characters.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 {
		return "", fmt.Errorf("%s holds %d characters: want a token of 16 or more (openssl rand -hex 32)", path, len(tok))
	}
	return tok, nil
}
