package verify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"bex.co/bex/internal/mvp"
)

// Outcome classifies one probe.
type Outcome string

// The outcomes of a probe.
const (
	// ServedLocally: the server serves the resource itself.
	ServedLocally Outcome = "ServedLocally"
	// Proxied: the server does not serve the resource, a peer does, and
	// the request was answered through the peer.
	Proxied Outcome = "Proxied"
	// Spurious404: a peer serves the resource but this server answered 404:
	// MVP is not wired, or its peer discovery has not synced.
	Spurious404 Outcome = "Spurious404"
	// Honest503: the server knew a peer serves the resource but could not
	// reach it (for example the identity lease of a dead apiserver).
	Honest503 Outcome = "Honest503"
	// Unserved: the server's merged discovery listed the resource for a
	// peer the verifier does not probe, and it answered 404: no apiserver
	// serves it any more (the peer is gone and its lease with it). Not a
	// failure: a tenant gets the 404 any single-version plane would give.
	Unserved Outcome = "Unserved"
	// Error is any other answer, and any failure of a request the server
	// must answer itself (a CRD or an aggregated API).
	Error Outcome = "Error"
)

// Failed reports whether a tenant request would have failed.
func (o Outcome) Failed() bool { return o == Spurious404 || o == Honest503 || o == Error }

// Outcomes are all the outcomes a probe can have.
func Outcomes() []Outcome {
	return []Outcome{ServedLocally, Proxied, Spurious404, Honest503, Unserved, Error}
}

// Verbs of the probes.
const (
	VerbList   = "list"
	VerbGet    = "get"
	VerbCreate = "create"
	VerbDelete = "delete"
)

// Target is one apiserver, reached directly.
type Target struct {
	// Name identifies the server in the report. When it is the server's
	// hostname, the verifier also knows which identity lease is its own
	// (see StaleLeases).
	Name string
	// Config points at this server only.
	Config *rest.Config
}

// Probe is one request and its outcome.
type Probe struct {
	APIServer string                      `json:"apiserver"`
	Resource  schema.GroupVersionResource `json:"resource"`
	Verb      string                      `json:"verb"`
	Status    int                         `json:"status"`
	Outcome   Outcome                     `json:"outcome"`
	// Message is the evidence: the server's answer, trimmed, when it was
	// not a success, or the error of a request that got no answer.
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// DiscoveryDiff compares one server's peer-merged /apis discovery with its
// own (nopeer) view and with what the other targets serve.
type DiscoveryDiff struct {
	APIServer string `json:"apiserver"`
	// Proxies are in the merged view but not the local one: exactly what
	// the server would proxy.
	Proxies []schema.GroupVersionResource `json:"proxies,omitempty"`
	// Missing are served by another target (its nopeer view) but absent
	// from this server's merged view: MVP is not wired on this server, or
	// its peer discovery has not synced.
	Missing []schema.GroupVersionResource `json:"missing,omitempty"`
	// FromUnknownPeers are among Proxies but served by no target: a peer
	// the verifier was not given, or a dead one whose lease is still there.
	FromUnknownPeers []schema.GroupVersionResource `json:"fromUnknownPeers,omitempty"`
}

// MetricDelta is how much a server's proxy counters rose while it was
// probed (see mvp.Metric*), summed over their labels.
type MetricDelta struct {
	APIServer               string  `json:"apiserver"`
	Rerouted                float64 `json:"rerouted"`
	PeerProxyErrors         float64 `json:"peerProxyErrors"`
	PeerDiscoverySyncErrors float64 `json:"peerDiscoverySyncErrors"`
	// Error says why the server's /metrics could not be read; the deltas
	// are then zero.
	Error string `json:"error,omitempty"`
}

// Finding reasons.
const (
	// ReasonMergedDiscoveryIncomplete: a server's peer-merged discovery
	// lacks resources another target serves.
	ReasonMergedDiscoveryIncomplete = "MergedDiscoveryIncomplete"
	// ReasonStaleLease: an identity lease of a gone apiserver is left.
	ReasonStaleLease = "StaleIdentityLease"
)

// Finding is something wrong with the plane that is not one probe's
// answer. Every finding fails the verdict.
type Finding struct {
	APIServer string `json:"apiserver,omitempty"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
}

// Report is the result of one verification round.
type Report struct {
	Probes []Probe `json:"probes"`
	// SkewSets maps each server to the resources it lacks and was probed
	// for: those other targets serve, and those its merged discovery lists
	// for peers the verifier does not know.
	SkewSets  map[string][]schema.GroupVersionResource `json:"skewSets"`
	Discovery []DiscoveryDiff                          `json:"discovery"`
	Metrics   []MetricDelta                            `json:"metrics"`
	Leases    []Lease                                  `json:"leases"`
	Findings  []Finding                                `json:"findings,omitempty"`
}

// Passed reports whether no probe failed and nothing was found.
func (r Report) Passed() bool { return len(r.Failures()) == 0 && len(r.Findings) == 0 }

// Failures returns the failed probes.
func (r Report) Failures() []Probe {
	var out []Probe
	for _, p := range r.Probes {
		if p.Outcome.Failed() {
			out = append(out, p)
		}
	}
	return out
}

// Baseline is what every server of any plane serves from its own storage:
// Namespaces. Given as Options.Always, a round on a plane of one version,
// whose skew sets are empty, still lists on each server, so that a server
// that answers discovery but cannot read its storage fails the round.
func Baseline() []schema.GroupVersionResource {
	return []schema.GroupVersionResource{{Version: "v1", Resource: "namespaces"}}
}

// Options say what to probe besides the skew set.
type Options struct {
	// Always are resources every server must serve itself, listed on each.
	Always []schema.GroupVersionResource
	// CRDs are custom resources every server must serve itself (MVP never
	// proxies a CRD): on each server an object is created, read, listed
	// and deleted.
	CRDs []CRDProbe
	// Namespace holds the objects of namespaced CRD probes. Required when
	// a CRD probe is namespaced; it must exist.
	Namespace string
	// Aggregated are resources of aggregated APIs (an APIService with a
	// backing service, never proxied by MVP) that every server must reach
	// itself: listed on each. None: not probed.
	Aggregated []schema.GroupVersionResource
	// RemoveStaleLeases deletes the stale identity leases StaleLeases
	// finds; they are reported either way.
	RemoveStaleLeases bool
	// StaleLeaseAfter is how long an identity lease must have gone
	// unrenewed to count as stale. Zero means DefaultStaleLeaseAfter.
	StaleLeaseAfter time.Duration
}

func (o Options) validate(targets []Target) error {
	var errs []error
	if len(targets) == 0 {
		errs = append(errs, errors.New("no apiserver to verify"))
	}
	names := map[string]bool{}
	for _, t := range targets {
		if t.Name == "" || t.Config == nil {
			errs = append(errs, fmt.Errorf("target %q: a name and a config are required", t.Name))
		}
		if names[t.Name] {
			errs = append(errs, fmt.Errorf("target %q is given twice", t.Name))
		}
		names[t.Name] = true
	}
	for _, c := range o.CRDs {
		if c.Resource.Resource == "" || c.Kind == "" {
			errs = append(errs, fmt.Errorf("CRD probe %v: resource and kind are required", c.Resource))
		}
		if c.Namespaced && o.Namespace == "" {
			errs = append(errs, fmt.Errorf("CRD probe %v is namespaced: Options.Namespace is required", c.Resource))
		}
	}
	return errors.Join(errs...)
}

// server is one target with what Run learned about it.
type server struct {
	Target
	client *http.Client
	local  mvp.Resources // nopeer discovery
	merged mvp.Resources // peer-merged discovery
	before mvp.Metrics
}

var proxyMetrics = []string{mvp.MetricRerouted, mvp.MetricPeerProxyErrors, mvp.MetricPeerDiscoveryErrs}

// Run verifies the plane once: it reads the identity leases (removing stale
// ones when asked), each server's discovery with and without peers and its
// proxy counters; probes each server's skew set with a list request, the
// Always and Aggregated resources with a list and each CRD with create,
// get, list and delete; then reads the counters again. It returns an error
// only when it could not verify at all (a target's discovery or the leases
// unreadable); what it found is in the Report.
func Run(ctx context.Context, targets []Target, opts Options) (Report, error) {
	if err := opts.validate(targets); err != nil {
		return Report{}, fmt.Errorf("verifying: %w", err)
	}
	servers := make([]*server, len(targets))
	for i, t := range targets {
		client, err := rest.HTTPClientFor(t.Config)
		if err != nil {
			return Report{}, fmt.Errorf("client for %s: %w", t.Name, err)
		}
		servers[i] = &server{Target: t, client: client}
	}
	rep := Report{SkewSets: map[string][]schema.GroupVersionResource{}}

	leases, err := StaleLeases(ctx, targets, opts.StaleLeaseAfter, opts.RemoveStaleLeases)
	if err != nil {
		return Report{}, err
	}
	rep.Leases = leases
	for _, l := range leases {
		if l.Stale && !l.Removed {
			rep.Findings = append(rep.Findings, Finding{Reason: ReasonStaleLease, Message: l.finding()})
		}
	}

	for _, s := range servers {
		if s.local, err = mvp.Discovery(ctx, s.Config, true); err != nil {
			return Report{}, fmt.Errorf("reading the local discovery of %s: %w", s.Name, err)
		}
		if s.merged, err = mvp.Discovery(ctx, s.Config, false); err != nil {
			return Report{}, fmt.Errorf("reading the merged discovery of %s: %w", s.Name, err)
		}
		// A failed scrape shows as the delta's error after the probes.
		s.before, _ = mvp.Scrape(ctx, s.Config, proxyMetrics...)
	}

	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, s := range servers {
		peers := mvp.Resources{}
		for j, o := range servers {
			if j != i {
				for gvr, verbs := range o.local {
					peers[gvr] = verbs
				}
			}
		}
		diff := DiscoveryDiff{APIServer: s.Name, Proxies: s.merged.Minus(s.local), Missing: peers.Minus(s.merged)}
		for _, gvr := range diff.Proxies {
			if _, ok := peers[gvr]; !ok {
				diff.FromUnknownPeers = append(diff.FromUnknownPeers, gvr)
			}
		}
		rep.Discovery = append(rep.Discovery, diff)
		if len(diff.Missing) > 0 {
			rep.Findings = append(rep.Findings, Finding{APIServer: s.Name, Reason: ReasonMergedDiscoveryIncomplete, Message: fmt.Sprintf(
				"the peer-merged discovery of %s lacks %d resources its peers serve (%s): MVP is not wired on it (--peer-ca-file), or its peer discovery has not synced",
				s.Name, len(diff.Missing), mvp.GVRList(diff.Missing, 3))})
		}
		// Probe what a peer serves and this server does not, and what its
		// merged view lists for peers the verifier does not know (a dead
		// peer's lease makes those a 503 trap).
		unknown := map[schema.GroupVersionResource]bool{}
		for _, gvr := range diff.FromUnknownPeers {
			unknown[gvr] = true
		}
		skew := listable(peers).Minus(s.local)
		for _, gvr := range diff.FromUnknownPeers {
			if s.merged.Has(gvr, VerbList) {
				skew = append(skew, gvr)
			}
		}
		sortGVRs(skew)
		rep.SkewSets[s.Name] = skew
		wg.Go(func() {
			var probes []Probe
			for _, gvr := range skew {
				probes = append(probes, s.probeSkew(ctx, gvr, unknown[gvr]))
			}
			for _, gvr := range slices.Concat(opts.Always, opts.Aggregated) {
				probes = append(probes, s.probeLocal(ctx, gvr))
			}
			for _, c := range opts.CRDs {
				probes = append(probes, s.probeCRD(ctx, c, opts.Namespace)...)
			}
			mu.Lock()
			rep.Probes = append(rep.Probes, probes...)
			mu.Unlock()
		})
	}
	wg.Wait()

	for _, s := range servers {
		rep.Metrics = append(rep.Metrics, s.metricDelta(ctx))
	}
	slices.SortStableFunc(rep.Probes, func(a, b Probe) int {
		if c := strings.Compare(a.APIServer, b.APIServer); c != 0 {
			return c
		}
		return strings.Compare(a.Resource.String(), b.Resource.String())
	})
	return rep, nil
}

// listable returns the resources of r that can be listed.
func listable(r mvp.Resources) mvp.Resources {
	out := mvp.Resources{}
	for gvr, verbs := range r {
		if slices.Contains(verbs, VerbList) {
			out[gvr] = verbs
		}
	}
	return out
}

func sortGVRs(g []schema.GroupVersionResource) {
	slices.SortFunc(g, func(a, b schema.GroupVersionResource) int { return strings.Compare(a.String(), b.String()) })
}

// GVRString writes a resource as group/version/resource, or
// version/resource in the core group (mvp.GVRString).
func GVRString(gvr schema.GroupVersionResource) string { return mvp.GVRString(gvr) }

// probeSkew lists gvr, which the server lacks, and classifies the answer.
// unknownPeer says that no target serves it: only the server's merged
// discovery listed it.
func (s *server) probeSkew(ctx context.Context, gvr schema.GroupVersionResource, unknownPeer bool) Probe {
	p, ok := s.request(ctx, gvr, VerbList, http.MethodGet, mvp.ListPath(gvr)+"?limit=1", nil)
	if !ok {
		return p
	}
	switch {
	case p.Status == http.StatusOK:
		p.Outcome = Proxied
	case p.Status == http.StatusNotFound && unknownPeer:
		p.Outcome = Unserved
	case p.Status == http.StatusNotFound:
		p.Outcome = Spurious404
	case p.Status == http.StatusServiceUnavailable:
		p.Outcome = Honest503
	default:
		p.Outcome = Error
	}
	return p
}

// probeLocal lists gvr, which the server must serve itself.
func (s *server) probeLocal(ctx context.Context, gvr schema.GroupVersionResource) Probe {
	p, _ := s.request(ctx, gvr, VerbList, http.MethodGet, mvp.ListPath(gvr)+"?limit=1", nil)
	return localOutcome(p)
}

// localOutcome classifies the answer to a request the server must answer
// itself: a success is ServedLocally, anything else an Error.
func localOutcome(p Probe) Probe {
	switch {
	case p.Outcome != "":
	case p.Status >= 200 && p.Status < 300:
		p.Outcome = ServedLocally
	default:
		p.Outcome = Error
	}
	return p
}

// request sends one request and records the answer. ok is false when there
// was none; the probe is then an Error with the reason.
func (s *server) request(ctx context.Context, gvr schema.GroupVersionResource, verb, method, path string, body []byte) (p Probe, ok bool) {
	p = Probe{APIServer: s.Name, Resource: gvr, Verb: verb, At: time.Now()}
	status, answer, err := do(ctx, s.client, method, strings.TrimSuffix(s.Config.Host, "/")+path, body)
	if err != nil {
		p.Outcome, p.Message = Error, err.Error()
		return p, false
	}
	p.Status = status
	if status < 200 || status >= 300 {
		p.Message = Evidence(answer)
	}
	return p, true
}

// metricDelta reads the counters again and subtracts the first reading.
func (s *server) metricDelta(ctx context.Context) MetricDelta {
	d := MetricDelta{APIServer: s.Name}
	after, err := mvp.Scrape(ctx, s.Config, proxyMetrics...)
	if err != nil || s.before == nil {
		if err == nil {
			err = errors.New("the first scrape failed")
		}
		d.Error = err.Error()
		return d
	}
	delta := func(name string) float64 { return after.Sum(name, nil) - s.before.Sum(name, nil) }
	d.Rerouted = delta(mvp.MetricRerouted)
	d.PeerProxyErrors = delta(mvp.MetricPeerProxyErrors)
	d.PeerDiscoverySyncErrors = delta(mvp.MetricPeerDiscoveryErrs)
	return d
}
