package continuity_test

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/upgrade/rollout"
	"bex.co/bex/test/platformtest"
)

// scenarioReport is one scenario's figures, as out/continuity-report.json
// has them.
type scenarioReport struct {
	Name     string `json:"name"`
	From     string `json:"from"`
	To       string `json:"to"`
	MVPWired bool   `json:"mvpWired"`
	// Rollout is "completed" or "stopped: why"; StepsDone counts the
	// apiservers replaced.
	Rollout string `json:"rollout"`
	// Plan are the FleetUpgrade plan's stages, in order.
	Plan         []string     `json:"plan"`
	StepsDone    int          `json:"stepsDone"`
	RolloutStart time.Time    `json:"rolloutStart"`
	RolloutEnd   time.Time    `json:"rolloutEnd"`
	Gates        []gateReport `json:"gates"`
	// Verified are the recorded verifier rounds that passed: for each, the
	// probes per apiserver.
	Verified []verifiedRound `json:"verified"`

	PushesAttempted int `json:"pushesAttempted"`
	PushesSucceeded int `json:"pushesSucceeded"`
	// PushesServed counts pushes whose app then served what was pushed.
	PushesServed int `json:"pushesServed"`
	// PushLatency is the push's duration (git push until it returned) by
	// phase: p50 and p99 in seconds.
	PushLatency map[phase][2]float64 `json:"pushLatencySeconds"`
	// Requests counts API, dashboard and CLI calls by kind; Failures by
	// kind and status.
	Requests map[string]int            `json:"requests"`
	Failures map[string]map[string]int `json:"failures"`
	// FailedSamples are the failed actions, in time order (at most 100).
	FailedSamples []sample `json:"failedSamples"`
	// ReleasesFromPushes counts the builds the app's releases run (a
	// config release runs its release's build again).
	// LeaderTerms are the leader election's terms; LeaderOverlaps the
	// moments two candidates led at once (none, or the election is broken).
	LeaderTerms    []term   `json:"leaderTerms"`
	LeaderOverlaps []string `json:"leaderOverlaps"`
	// LeaderHandedOverBy is the leader that stepped down mid-rollout.
	LeaderHandedOverBy string  `json:"leaderHandedOverBy,omitempty"`
	ReleasesFromPushes int     `json:"releasesFromPushes"`
	BuildsStuck        []int   `json:"buildsStuck"`
	Seconds            float64 `json:"seconds"`

	events  []rollout.Event
	samples []sample
}

// verifiedRound is one passed verifier round as recorded: its machine and
// how many probes each apiserver answered.
type verifiedRound struct {
	Machine     string         `json:"machine"`
	ByAPIServer map[string]int `json:"byAPIServer"`
}

// minPlatformProbes is what each apiserver of the management cluster must
// answer in a passed round besides the skew set: the App CRD's create,
// get, list and delete, and a list of the scheduling API's
// clustercapacities.
const minPlatformProbes = 5

// gateReport is the verifier's verdicts after one step.
type gateReport struct {
	Step    int       `json:"step"`
	Old     string    `json:"old"`
	New     string    `json:"new"`
	Started time.Time `json:"started"`
	Passed  bool      `json:"passed"`
	Seconds float64   `json:"seconds"`
	Rounds  []string  `json:"rounds"`
}

func (r *scenarioReport) fill(u *tenant, events []rollout.Event, took time.Duration) {
	u.mu.Lock()
	samples := slices.Clone(u.samples)
	u.mu.Unlock()
	sort.Slice(samples, func(i, j int) bool { return samples[i].At.Before(samples[j].At) })
	r.samples, r.events, r.Seconds = samples, events, took.Seconds()
	r.Requests, r.Failures, r.PushLatency = map[string]int{}, map[string]map[string]int{}, map[phase][2]float64{}
	lat := map[phase][]float64{}
	for _, s := range samples {
		switch s.Kind {
		case "push":
			r.PushesAttempted++
			if s.OK {
				r.PushesSucceeded++
				lat[s.Phase] = append(lat[s.Phase], s.Latency.Seconds())
			}
		case "serve":
			if s.OK {
				r.PushesServed++
			}
		default:
			r.Requests[s.Kind]++
		}
		if !s.OK {
			if r.Failures[s.Kind] == nil {
				r.Failures[s.Kind] = map[string]int{}
			}
			r.Failures[s.Kind][s.Status]++
			if len(r.FailedSamples) < 100 {
				r.FailedSamples = append(r.FailedSamples, s)
			}
		}
	}
	for p, xs := range lat {
		slices.Sort(xs)
		r.PushLatency[p] = [2]float64{quantile(xs, 0.5), quantile(xs, 0.99)}
	}
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func (r *scenarioReport) failed() int {
	n := 0
	for _, byStatus := range r.Failures {
		for _, c := range byStatus {
			n += c
		}
	}
	return n
}

func (r *scenarioReport) requests() int {
	n := 0
	for _, c := range r.Requests {
		n += c
	}
	return n
}

// check asserts the scenario's bar.
func (r *scenarioReport) check(t *testing.T) {
	t.Helper()
	if r.PushesAttempted < 5 {
		t.Errorf("only %d pushes were attempted", r.PushesAttempted)
	}
	if len(r.LeaderTerms) == 0 || len(r.LeaderOverlaps) > 0 {
		t.Errorf("leader election: %d terms, overlaps %v; want a leader and never two", len(r.LeaderTerms), r.LeaderOverlaps)
	}
	if len(r.Plan) == 0 || r.Plan[len(r.Plan)-1] != "(management)" {
		t.Errorf("plan stages %v: want the management cluster's stage last", r.Plan)
	}
	if r.LeaderHandedOverBy == "" || len(r.LeaderTerms) < 2 {
		t.Errorf("leader election: %d terms, handed over by %q; want a hand-over mid-rollout", len(r.LeaderTerms), r.LeaderHandedOverBy)
	}
	if !r.MVPWired {
		// The verifier must have held the rollout after the first
		// apiserver was replaced; what tenants saw is reported.
		if r.StepsDone != 1 || !strings.HasPrefix(r.Rollout, "paused by the verifier") {
			t.Errorf("MVP not wired: the rollout %s after %d replaced apiservers, want it paused by the verifier after the first", r.Rollout, r.StepsDone)
		}
		return
	}
	if r.Rollout != "completed" || r.StepsDone != 3 {
		t.Errorf("the rollout %s after %d replaced apiservers, want completed in 3", r.Rollout, r.StepsDone)
	}
	if r.PushesSucceeded != r.PushesAttempted || r.PushesServed != r.PushesSucceeded {
		t.Errorf("pushes: %d attempted, %d succeeded, %d served what was pushed; want all", r.PushesAttempted, r.PushesSucceeded, r.PushesServed)
	}
	if n := r.failed(); n != 0 {
		var first []string
		for _, s := range r.FailedSamples[:min(3, len(r.FailedSamples))] {
			first = append(first, fmt.Sprintf("%s (%s) %s: %s %s", s.At.Format("15:04:05.000"), s.Phase, s.Kind, s.Status, s.Detail))
		}
		t.Errorf("%d tenant actions failed: %v; first:\n%s", n, r.Failures, strings.Join(first, "\n"))
	}
	if r.ReleasesFromPushes != r.PushesSucceeded {
		t.Errorf("%d builds released, %d pushes succeeded: want them equal", r.ReleasesFromPushes, r.PushesSucceeded)
	}
	if len(r.BuildsStuck) > 0 {
		t.Errorf("builds still running after the load stopped: %v", r.BuildsStuck)
	}
	for _, g := range r.Gates {
		if !g.Passed {
			t.Errorf("the gate after step %d did not pass: %v", g.Step, g.Rounds)
		}
	}
	// The platform's own APIs are probed on every apiserver of the
	// management cluster in every passed round: MVP proxies neither CRDs
	// nor aggregated APIs, so each server must serve them itself.
	if len(r.Verified) < 3 {
		t.Errorf("%d passed verifier rounds recorded, want one per replaced machine at least", len(r.Verified))
	}
	for _, v := range r.Verified {
		short := len(v.ByAPIServer) != 3
		for _, n := range v.ByAPIServer {
			short = short || n < minPlatformProbes
		}
		if short {
			t.Errorf("the passed round after machine %s probed %v: want 3 apiservers with at least %d probes each (the App CRD and the scheduling API)", v.Machine, v.ByAPIServer, minPlatformProbes)
		}
	}
}

// writeReports writes out/continuity-report.json, .md and a timeline SVG
// per scenario at the repository's root, and logs their paths.
func writeReports(t *testing.T, reports []*scenarioReport) {
	if len(reports) == 0 {
		return
	}
	dir := filepath.Join(platformtest.RepoRoot(t), "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Error(err)
		return
	}
	data, _ := json.MarshalIndent(map[string]any{"generated": time.Now().UTC(), "scenarios": reports}, "", "  ")
	paths := []string{filepath.Join(dir, "continuity-report.json"), filepath.Join(dir, "continuity-report.md")}
	var md strings.Builder
	fmt.Fprintf(&md, "# Continuity through the management plane's upgrade\n\nGenerated %s by `make test-continuity`.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	md.WriteString("| scenario | MVP | rollout | pushes (attempted / succeeded / served) | push p50 / p99 before, during, after (s) | releases from pushes | API, dashboard and CLI calls | failed | builds stuck |\n")
	md.WriteString("| --- | --- | --- | --- | --- | ---: | ---: | --- | --- |\n")
	for _, r := range reports {
		mvp := "not wired"
		if r.MVPWired {
			mvp = "wired"
		}
		var lat []string
		for _, p := range []phase{before, during, after} {
			l := r.PushLatency[p]
			lat = append(lat, fmt.Sprintf("%.1f / %.1f", l[0], l[1]))
		}
		stuck := "none"
		if len(r.BuildsStuck) > 0 {
			stuck = fmt.Sprint(r.BuildsStuck)
		}
		fmt.Fprintf(&md, "| %s | %s | %s (machines replaced: %d) | %d / %d / %d | %s | %d | %d | %d %s | %s |\n",
			r.Name, mvp, short(r.Rollout, 90), r.StepsDone, r.PushesAttempted, r.PushesSucceeded, r.PushesServed, strings.Join(lat, ", "),
			r.ReleasesFromPushes, r.requests(), r.failed(), failuresText(r.Failures), stuck)
	}
	for _, r := range reports {
		fmt.Fprintf(&md, "\n## %s\n\n", r.Name)
		for _, g := range r.Gates {
			fmt.Fprintf(&md, "- machine %d (%s): verified %t", g.Step, g.New, g.Passed)
			if len(g.Rounds) > 0 {
				fmt.Fprintf(&md, "; the run's verifier rounds: %s", compress(g.Rounds))
			}
			md.WriteString("\n")
		}
		fmt.Fprintf(&md, "- FleetUpgrade plan: %s\n", strings.Join(r.Plan, ", "))
		fmt.Fprintf(&md, "- leader election through the load balancer: %d term(s), %d overlap(s); %s stepped down mid-rollout\n", len(r.LeaderTerms), len(r.LeaderOverlaps), r.LeaderHandedOverBy)
		if r.failed() == 0 {
			md.WriteString("- no tenant action failed: the platform's own requests (Apps, Routes, the scheduling API) are CRDs and an aggregated API, which every apiserver serves itself; what a client of the skew resources would have got is in the verifier's rounds above\n")
		}
		if len(r.FailedSamples) > 0 {
			md.WriteString("\nFailed tenant actions:\n\n")
			for _, s := range r.FailedSamples {
				fmt.Fprintf(&md, "- %s (%s) %s: %s %s\n", s.At.Format("15:04:05.000"), s.Phase, s.Kind, s.Status, strings.ReplaceAll(s.Detail, "\n", " "))
			}
		}
		svg := filepath.Join(dir, "continuity-"+r.Name+".svg")
		if err := os.WriteFile(svg, []byte(timelineSVG(r)), 0o644); err != nil {
			t.Error(err)
		}
		fmt.Fprintf(&md, "\n![%s](continuity-%s.svg)\n", r.Name, r.Name)
		paths = append(paths, svg)
	}
	if err := os.WriteFile(paths[0], data, 0o644); err != nil {
		t.Error(err)
	}
	if err := os.WriteFile(paths[1], []byte(md.String()), 0o644); err != nil {
		t.Error(err)
	}
	for _, p := range paths {
		t.Logf("report: %s", p)
		fmt.Println("report:", p)
	}
}

func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// compress writes repeated verdicts once with a count.
func compress(rounds []string) string {
	var parts []string
	for i := 0; i < len(rounds); {
		j := i
		for j < len(rounds) && rounds[j] == rounds[i] {
			j++
		}
		if j-i > 1 {
			parts = append(parts, fmt.Sprintf("%s (×%d)", rounds[i], j-i))
		} else {
			parts = append(parts, rounds[i])
		}
		i = j
	}
	return strings.Join(parts, " | ")
}

func failuresText(f map[string]map[string]int) string {
	var parts []string
	for kind, byStatus := range f {
		for st, n := range byStatus {
			parts = append(parts, fmt.Sprintf("%s %s×%d", kind, st, n))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return ""
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// timelineSVG draws the apiservers' versions over time, the tenant's
// pushes and the failed calls.
func timelineSVG(r *scenarioReport) string {
	if len(r.samples) == 0 {
		return `<svg xmlns="http://www.w3.org/2000/svg"/>`
	}
	t0, t1 := r.samples[0].At, r.samples[len(r.samples)-1].At
	if !t1.After(t0) {
		t1 = t0.Add(time.Second)
	}
	const width, left, rowH = 960.0, 170.0, 26.0
	x := func(t time.Time) float64 { return left + (width-left-10)*float64(t.Sub(t0))/float64(t1.Sub(t0)) }
	// Each apiserver's life, from the rollout's events.
	type life struct {
		version    string
		from, to   time.Time
		rowOrdinal int
	}
	lives := map[string]*life{}
	var order []string
	for _, e := range r.events {
		for _, s := range e.Servers {
			l, ok := lives[s.Name]
			if !ok {
				l = &life{version: s.Version, from: e.Time, rowOrdinal: len(order)}
				if len(order) < 3 && e.Phase == rollout.PhaseStarted {
					l.from = t0
				}
				lives[s.Name] = l
				order = append(order, s.Name)
			}
			l.to = e.Time
		}
	}
	for _, l := range lives {
		if l.to.Equal(r.RolloutEnd) || l.to.After(r.RolloutEnd.Add(-time.Second)) {
			l.to = t1
		}
	}
	rows := len(order) + 1
	height := 30 + rowH*float64(rows) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`, width, height)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="#ffffff"/>`, width, height)
	colors := map[string]string{r.From: "#9fc5e8", r.To: "#b6d7a8"}
	for i, name := range order {
		l := lives[name]
		y := 24 + rowH*float64(i)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`, left-6, y+16, html.EscapeString(name))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s</title></rect>`,
			x(l.from), y+4, max(x(l.to)-x(l.from), 1), rowH-8, colors[l.version], html.EscapeString(name), l.version)
	}
	y := 24 + rowH*float64(len(order))
	fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">tenant</text>`, left-6, y+16)
	for _, s := range r.samples {
		if s.Kind != "push" && s.OK {
			continue
		}
		color := "#2e7d32"
		if !s.OK {
			color = "#c62828"
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="3" height="%.1f" fill="%s"><title>%s %s %s</title></rect>`,
			x(s.At), y+5, rowH-10, color, s.At.Format("15:04:05"), html.EscapeString(s.Kind), html.EscapeString(s.Status))
	}
	ly := y + rowH + 16
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`, left, ly-9, colors[r.From], left+16, ly, r.From)
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`, left+80, ly-9, colors[r.To], left+96, ly, r.To)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">green: a push; red: a failed push or call</text>`, left+170, ly)
	b.WriteString(`</svg>`)
	return b.String()
}
