package verify

import (
	"context"
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
	// Error is any other answer.
	Error Outcome = "Error"
)

// Failed reports whether a tenant request would have failed.
func (o Outcome) Failed() bool { return o == Spurious404 || o == Honest503 || o == Error }

// Target is one apiserver, reached directly.
type Target struct {
	// Name identifies the server in the report (its machine or hostname).
	Name string
	// Config points at this server only.
	Config *rest.Config
}

// Probe is one request and its outcome.
type Probe struct {
	APIServer string                      `json:"apiserver"`
	Resource  schema.GroupVersionResource `json:"resource"`
	Status    int                         `json:"status"`
	Outcome   Outcome                     `json:"outcome"`
	Message   string                      `json:"message,omitempty"`
	At        time.Time                   `json:"at"`
}

// Report is the result of one verification round.
type Report struct {
	Probes []Probe `json:"probes"`
	// SkewSets maps each server to the resources only its peers serve.
	SkewSets map[string][]schema.GroupVersionResource `json:"skewSets"`
}

// Passed reports whether no probe failed.
func (r Report) Passed() bool {
	for _, p := range r.Probes {
		if p.Outcome.Failed() {
			return false
		}
	}
	return true
}

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

// Options say what to probe besides the skew set.
type Options struct {
	// Always are resources every server must serve itself, such as the
	// platform's CRDs and aggregated APIs (never proxied by MVP).
	Always []schema.GroupVersionResource
}

// Run probes every target once: the skew set of each, with a list request,
// and the Always resources.
func Run(ctx context.Context, targets []Target, opts Options) (Report, error) {
	local := make([]mvp.Resources, len(targets))
	for i, t := range targets {
		res, err := mvp.Discovery(ctx, t.Config, true)
		if err != nil {
			return Report{}, fmt.Errorf("reading the local discovery of %s: %w", t.Name, err)
		}
		local[i] = res
	}
	rep := Report{SkewSets: map[string][]schema.GroupVersionResource{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, t := range targets {
		peers := mvp.Resources{}
		for j := range targets {
			if j == i {
				continue
			}
			for gvr, verbs := range local[j] {
				if slices.Contains(verbs, "list") {
					peers[gvr] = verbs
				}
			}
		}
		skew := peers.Minus(local[i])
		rep.SkewSets[t.Name] = skew
		wg.Go(func() {
			var probes []Probe
			for _, gvr := range skew {
				probes = append(probes, probe(ctx, t, gvr, false))
			}
			for _, gvr := range opts.Always {
				probes = append(probes, probe(ctx, t, gvr, true))
			}
			mu.Lock()
			rep.Probes = append(rep.Probes, probes...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(rep.Probes, func(a, b Probe) int {
		if c := strings.Compare(a.APIServer, b.APIServer); c != 0 {
			return c
		}
		return strings.Compare(a.Resource.String(), b.Resource.String())
	})
	return rep, nil
}

// probe lists gvr on one server and classifies the answer. local says
// whether the server is expected to serve it itself.
func probe(ctx context.Context, t Target, gvr schema.GroupVersionResource, local bool) Probe {
	p := Probe{APIServer: t.Name, Resource: gvr, At: time.Now()}
	client, err := rest.HTTPClientFor(t.Config)
	if err != nil {
		p.Outcome, p.Message = Error, err.Error()
		return p
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(t.Config.Host, "/")+mvp.ListPath(gvr)+"?limit=1", nil)
	if err != nil {
		p.Outcome, p.Message = Error, err.Error()
		return p
	}
	resp, err := client.Do(req)
	if err != nil {
		p.Outcome, p.Message = Error, err.Error()
		return p
	}
	resp.Body.Close()
	p.Status = resp.StatusCode
	switch {
	case resp.StatusCode == http.StatusOK && local:
		p.Outcome = ServedLocally
	case resp.StatusCode == http.StatusOK:
		p.Outcome = Proxied
	case resp.StatusCode == http.StatusNotFound && !local:
		p.Outcome, p.Message = Spurious404, "a peer serves it, but this apiserver answered 404: is MVP wired (--peer-ca-file)?"
	case resp.StatusCode == http.StatusServiceUnavailable:
		p.Outcome, p.Message = Honest503, "the peer that serves it could not be reached"
	default:
		p.Outcome, p.Message = Error, resp.Status
	}
	return p
}
