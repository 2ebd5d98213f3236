package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestRatiosByRound checks that each comparison carries its ratio within
// every round beside the ratio of the medians, and that the report prints
// their range.
func TestRatiosByRound(t *testing.T) {
	m := func(rps, cpu float64) measurement {
		return measurement{RPS: rps, CPU: map[string]float64{roleProxy: cpu}}
	}
	scenarios := []scenario{{name: direct}, {name: edgePlain}, {name: edgeTLS}, {name: "Traefik plain"}, {name: "Traefik TLS"}}
	res := [][]measurement{
		{m(400, 0), m(400, 0)},
		{m(200, 50), m(100, 60)},
		{m(120, 60), m(100, 80)},
		{m(100, 100), m(100, 120)},
		{m(100, 60), m(125, 100)},
	}
	r := newReport(&options{}, machine{}, []string{"Traefik"}, scenarios, res)
	byName := map[string]ratio{}
	for _, x := range r.Ratios {
		byName[x.Name] = x
	}
	tls := byName["edge / Traefik, TLS"]
	if want := []float64{1.2, 0.8}; !slices.Equal(tls.ByRound, want) {
		t.Errorf("TLS throughput by round %v, want %v", tls.ByRound, want)
	}
	if tls.Value != 110.0/112.5 {
		t.Errorf("TLS throughput ratio %v, want the medians' %v", tls.Value, 110.0/112.5)
	}
	if cpu := byName["edge / Traefik CPU per request, TLS"]; !slices.Equal(cpu.ByRound, []float64{1, 0.8}) {
		t.Errorf("TLS CPU by round %v, want [1 0.8]", cpu.ByRound)
	}
	var out bytes.Buffer
	r.write(&out)
	if !strings.Contains(out.String(), "| edge / Traefik, TLS | 0.98 (0.80 to 1.20) |") {
		t.Errorf("report lacks the TLS ratio's range:\n%s", out.String())
	}
}
