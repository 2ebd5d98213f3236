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
	// Machines are the plane's control-plane Machines, in the order
	// KubeadmControlPlane marked them for deletion, then the others.
	Machines []machineTimes `json:"machines"`

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

func (r *scenarioReport) fill(u *tenant, machines []machineTimes, took time.Duration) {
	u.mu.Lock()
	samples := slices.Clone(u.samples)
	u.mu.Unlock()
	sort.Slice(samples, func(i, j int) bool { return samples[i].At.Before(samples[j].At) })
	r.samples, r.Machines, r.Seconds = samples, machines, took.Seconds()
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
	if !r.MVPWired {
		t.Errorf("the operator's API says the management cluster's KubeadmControlPlane does not run the Mixed Version Proxy; make run wires it")
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
	if r.Rollout != "completed" || r.StepsDone != 3 {
		t.Errorf("the rollout %s after %d replaced apiservers, want completed in 3", r.Rollout, r.StepsDone)
	}
	checkReplaced(t, r.Machines, r.From)
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

// checkReplaced asserts a rollout's Machines under the gate: three of
// version from at the start, each marked and gone, and none gone before
// the gate released it.
func checkReplaced(t *testing.T, machines []machineTimes, from string) {
	t.Helper()
	old := 0
	for _, m := range machines {
		if m.Created.IsZero() && m.Version == from {
			old++
			if m.Marked.IsZero() || m.Gone.IsZero() {
				t.Errorf("machine %s of the cluster's start: marked %v, gone %v; want it replaced", m.Name, m.Marked, m.Gone)
			}
		}
		if !m.Marked.IsZero() && (m.Released.IsZero() || m.Gone.Before(m.Released)) {
			t.Errorf("machine %s: marked %s, gate released %s, gone %s; want it gone only after the gate released it",
				m.Name, m.Marked.Format(time.TimeOnly), m.Released.Format(time.TimeOnly), m.Gone.Format(time.TimeOnly))
		}
	}
	if old != 3 {
		t.Errorf("%d machines at %s at the start, want 3", old, from)
	}
}

// writeReports writes out/continuity-report.json, .md and a timeline SVG
// per management-plane scenario at the repository's root, and logs their
// paths; workload, when not nil, is the workload-cluster scenario's.
func writeReports(t *testing.T, reports []*scenarioReport, workload *workloadReport) {
	if len(reports) == 0 && workload == nil {
		return
	}
	dir := filepath.Join(platformtest.RepoRoot(t), "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Error(err)
		return
	}
	data, _ := json.MarshalIndent(map[string]any{"generated": time.Now().UTC(), "scenarios": reports, "workloadCluster": workload}, "", "  ")
	paths := []string{filepath.Join(dir, "continuity-report.json"), filepath.Join(dir, "continuity-report.md")}
	var md strings.Builder
	fmt.Fprintf(&md, "# Continuity through upgrades\n\nGenerated %s by `make test-continuity`.\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	if len(reports) > 0 {
		md.WriteString("\n## The management plane's upgrade\n\n")
		md.WriteString("| scenario | MVP | rollout | pushes (attempted / succeeded / served) | push p50 / p99 before, during, after (s) | releases from pushes | API, dashboard and CLI calls | failed | builds stuck |\n")
		md.WriteString("| --- | --- | --- | --- | --- | ---: | ---: | --- | --- |\n")
	}
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
		fmt.Fprintf(&md, "\n### %s\n\n", r.Name)
		md.WriteString(machinesTable(r.Machines, r.RolloutStart))
		md.WriteString("\n")
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
	if workload != nil {
		md.WriteString(workload.markdown())
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
	// The left column holds a Machine's name (KubeadmControlPlane's
	// "<cluster>-control-plane-xxxxx").
	const width, left, rowH = 1060.0, 240.0, 26.0
	x := func(t time.Time) float64 { return left + (width-left-10)*float64(t.Sub(t0))/float64(t1.Sub(t0)) }
	// Each machine's apiserver's life, from the watch: in the load
	// balancer from its join (the start's machines from the first sample)
	// until it left.
	type life struct {
		version  string
		from, to time.Time
	}
	lives := map[string]*life{}
	var order []string
	for _, m := range r.Machines {
		if m.JoinedLB.IsZero() {
			continue
		}
		l := &life{version: m.Version, from: m.JoinedLB, to: m.LeftLB}
		if m.Created.IsZero() || l.from.Before(t0) {
			l.from = t0
		}
		if l.to.IsZero() || l.to.After(t1) {
			l.to = t1
		}
		lives[m.Name] = l
		order = append(order, m.Name)
	}
	slices.SortStableFunc(order, func(a, b string) int { return lives[a].from.Compare(lives[b].from) })
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

// workloadReport is the workload-cluster scenario's figures, as
// out/continuity-report.json has them under "workloadCluster".
type workloadReport struct {
	// Cluster is the local cluster's "namespace/name"; Worker the worker
	// Node the app's Pod ran on at the start, PodNode where it ran at the
	// end.
	Cluster string `json:"cluster"`
	From    string `json:"from"`
	To      string `json:"to"`
	WireMVP bool   `json:"wireMVP"`
	Worker  string `json:"worker"`
	PodNode string `json:"podNode"`
	// Rollout is "completed" (the FleetUpgrade Succeeded and every
	// Machine, control plane and workers, runs To) or why not.
	Rollout      string    `json:"rollout"`
	Plan         []string  `json:"plan"`
	RolloutStart time.Time `json:"rolloutStart"`
	RolloutEnd   time.Time `json:"rolloutEnd"`
	// Machines are the control-plane Machines, in the order
	// KubeadmControlPlane marked them for deletion.
	Machines []machineTimes `json:"machines"`
	Gates    []gateReport   `json:"gates"`
	// Rounds split the run: before the FleetUpgrade, until KCP marked the
	// first Machine, one per marked Machine, after.
	Rounds []roundReport `json:"rounds"`
	// Failures counts the failed actions by kind and status;
	// FailedSamples are the first 100 of them, in time order.
	Failures      map[string]map[string]int `json:"failures"`
	FailedSamples []sample                  `json:"failedSamples"`
	Seconds       float64                   `json:"seconds"`
}

// roundReport is what the tenant and the load generator did in one round.
type roundReport struct {
	Name string    `json:"name"`
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Pushes, Rollbacks and Logs count attempts; ...OK those that
	// succeeded; ...Served the pushes and rollbacks then served through
	// the edge.
	Pushes          int `json:"pushes"`
	PushesOK        int `json:"pushesOK"`
	PushesServed    int `json:"pushesServed"`
	Rollbacks       int `json:"rollbacks"`
	RollbacksOK     int `json:"rollbacksOK"`
	RollbacksServed int `json:"rollbacksServed"`
	Logs            int `json:"logs"`
	LogsOK          int `json:"logsOK"`
	// Requests are the load generator's requests to the app's URL.
	Requests       int `json:"requests"`
	RequestsFailed int `json:"requestsFailed"`
	// Failed counts every failed action of the round.
	Failed int `json:"failed"`
}

// fill splits the samples into rounds at the Machines' marks.
func (r *workloadReport) fill(u *workloadTenant, machines []machineTimes, took time.Duration) {
	u.mu.Lock()
	samples := slices.Clone(u.samples)
	u.mu.Unlock()
	sort.Slice(samples, func(i, j int) bool { return samples[i].At.Before(samples[j].At) })
	r.Machines, r.Seconds = machines, took.Seconds()
	version := map[string]string{}
	for _, m := range machines {
		version[m.Name] = m.Version
	}
	var end time.Time
	if len(samples) > 0 {
		end = samples[len(samples)-1].At.Add(time.Nanosecond)
	}
	r.Rounds = []roundReport{{Name: "before"}, {Name: "FleetUpgrade created", From: r.RolloutStart}}
	for i, m := range machines {
		if m.Marked.IsZero() || m.Marked.After(r.RolloutEnd) {
			continue
		}
		step := "to " + version[m.ReplacedBy]
		if version[m.ReplacedBy] == m.Version {
			step = "wire MVP"
		}
		r.Rounds = append(r.Rounds, roundReport{Name: fmt.Sprintf("machine %d (%s): %s", i+1, step, m.Name), From: m.Marked})
	}
	r.Rounds = append(r.Rounds, roundReport{Name: "after", From: r.RolloutEnd})
	for i := range r.Rounds {
		if i+1 < len(r.Rounds) {
			r.Rounds[i].To = r.Rounds[i+1].From
		} else {
			r.Rounds[i].To = end
		}
	}
	if len(samples) > 0 {
		r.Rounds[0].From = samples[0].At
	}
	r.Failures = map[string]map[string]int{}
	for _, s := range samples {
		k := len(r.Rounds) - 1
		for k > 0 && s.At.Before(r.Rounds[k].From) {
			k--
		}
		rd := &r.Rounds[k]
		switch s.Kind {
		case "push":
			rd.Pushes++
			rd.PushesOK += b2i(s.OK)
		case "serve":
			rd.PushesServed += b2i(s.OK)
		case "rollback":
			rd.Rollbacks++
			rd.RollbacksOK += b2i(s.OK)
		case "rollback served":
			rd.RollbacksServed += b2i(s.OK)
		case "logs":
			rd.Logs++
			rd.LogsOK += b2i(s.OK)
		case "request":
			rd.Requests++
			rd.RequestsFailed += b2i(!s.OK)
		}
		if !s.OK {
			rd.Failed++
			if r.Failures[s.Kind] == nil {
				r.Failures[s.Kind] = map[string]int{}
			}
			r.Failures[s.Kind][s.Status]++
			if len(r.FailedSamples) < 100 {
				// The round the action began in, not the phase it ended in.
				s.Phase = phase(rd.Name)
				r.FailedSamples = append(r.FailedSamples, s)
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// total sums the rounds.
func (r *workloadReport) total() roundReport {
	var t roundReport
	for _, rd := range r.Rounds {
		t.Pushes += rd.Pushes
		t.PushesOK += rd.PushesOK
		t.PushesServed += rd.PushesServed
		t.Rollbacks += rd.Rollbacks
		t.RollbacksOK += rd.RollbacksOK
		t.RollbacksServed += rd.RollbacksServed
		t.Logs += rd.Logs
		t.LogsOK += rd.LogsOK
		t.Requests += rd.Requests
		t.RequestsFailed += rd.RequestsFailed
		t.Failed += rd.Failed
	}
	return t
}

// check asserts the workload scenario's bar: the rollout completed under
// the gate, and no push, rollback, log read or request to the app failed.
func (r *workloadReport) check(t *testing.T) {
	t.Helper()
	if r.Rollout != "completed" {
		t.Errorf("the rollout %s, want completed", r.Rollout)
	}
	checkReplaced(t, r.Machines, r.From)
	for _, g := range r.Gates {
		if !g.Passed {
			t.Errorf("the gate after step %d (%s) did not pass: %v", g.Step, g.New, g.Rounds)
		}
	}
	tot := r.total()
	if tot.Pushes < 5 || tot.Rollbacks < 1 || tot.Logs < 1 {
		t.Errorf("%d pushes, %d rollbacks, %d log reads: want 5, 1 and 1 at least", tot.Pushes, tot.Rollbacks, tot.Logs)
	}
	if tot.PushesOK != tot.Pushes || tot.PushesServed != tot.Pushes || tot.RollbacksOK != tot.Rollbacks || tot.RollbacksServed != tot.Rollbacks {
		t.Errorf("pushes: %d attempted, %d succeeded, %d served; rollbacks: %d, %d, %d; want all", tot.Pushes, tot.PushesOK, tot.PushesServed,
			tot.Rollbacks, tot.RollbacksOK, tot.RollbacksServed)
	}
	for _, rd := range r.Rounds {
		if rd.Requests == 0 {
			t.Errorf("round %q: no request to the app", rd.Name)
		}
	}
	if tot.Failed != 0 {
		var first []string
		for _, s := range r.FailedSamples[:min(5, len(r.FailedSamples))] {
			first = append(first, fmt.Sprintf("%s (%s) %s: %s %s", s.At.Format("15:04:05.000"), s.Phase, s.Kind, s.Status, s.Detail))
		}
		t.Errorf("%d tenant actions failed (%d of %d requests to the app): %v; first:\n%s", tot.Failed, tot.RequestsFailed, tot.Requests,
			r.Failures, strings.Join(first, "\n"))
	}
}

// markdown is the scenario's section of out/continuity-report.md.
func (r *workloadReport) markdown() string {
	var b strings.Builder
	rel := func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return fmt.Sprintf("%.0f", t.Sub(r.RolloutStart).Seconds())
	}
	fmt.Fprintf(&b, "\n## Continuity through a workload cluster's rollout\n\n")
	fmt.Fprintf(&b, "Cluster %s of the local fleet: three control-plane machines rolled %s → %s by a FleetUpgrade (wireMVP %t, plan %s) through the real KubeadmControlPlane, then its two workers through their MachineDeployment; "+
		"the tenant's app on a Pod of the worker %s (bex-node), at the end on %s. Rollout: %s in %.0f s; the scenario took %.0f s. "+
		"The workers' replacement falls in the last round.\n\n",
		r.Cluster, r.From, r.To, r.WireMVP, strings.Join(r.Plan, ", "), r.Worker, r.PodNode, r.Rollout, r.RolloutEnd.Sub(r.RolloutStart).Seconds(), r.Seconds)
	b.WriteString("| round | from (s) | length (s) | pushes (attempted / succeeded / served) | rollbacks (attempted / succeeded / served) | log reads (ok / all) | requests to the app | failed |\n")
	b.WriteString("| --- | ---: | ---: | --- | --- | --- | ---: | ---: |\n")
	row := func(rd roundReport, from, length string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %d / %d / %d | %d / %d / %d | %d / %d | %d | %d |\n", rd.Name, from, length,
			rd.Pushes, rd.PushesOK, rd.PushesServed, rd.Rollbacks, rd.RollbacksOK, rd.RollbacksServed, rd.LogsOK, rd.Logs, rd.Requests, rd.Failed)
	}
	for _, rd := range r.Rounds {
		row(rd, rel(rd.From), fmt.Sprintf("%.0f", rd.To.Sub(rd.From).Seconds()))
	}
	row(r.total(), "", "")
	b.WriteString("\n")
	b.WriteString(machinesTable(r.Machines, r.RolloutStart))
	for _, g := range r.Gates {
		fmt.Fprintf(&b, "- step %d (%s): verified %t in %.0f s\n", g.Step, g.New, g.Passed, g.Seconds)
	}
	if len(r.FailedSamples) > 0 {
		b.WriteString("\nFailed tenant actions:\n\n")
		for _, s := range r.FailedSamples {
			fmt.Fprintf(&b, "- %s (%s) %s: %s %s\n", s.At.Format("15:04:05.000"), s.Phase, s.Kind, s.Status, strings.ReplaceAll(s.Detail, "\n", " "))
		}
	}
	return b.String()
}

// machinesTable is the report's table of a cluster's control-plane
// Machines, in the order KubeadmControlPlane marked them, with times in
// seconds from start (the FleetUpgrade's creation).
func machinesTable(machines []machineTimes, start time.Time) string {
	rel := func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return fmt.Sprintf("%.0f", t.Sub(start).Seconds())
	}
	// The load balancer's columns when the watch saw it (it had the Host).
	lb := slices.ContainsFunc(machines, func(m machineTimes) bool { return !m.JoinedLB.IsZero() })
	var b strings.Builder
	b.WriteString("The control-plane Machines in the order KubeadmControlPlane marked them (seconds from the FleetUpgrade's creation; a dash: not seen):\n\n")
	if lb {
		b.WriteString("| machine | version | in the load balancer | marked | gate released | out of the load balancer | gone | replaced by |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	} else {
		b.WriteString("| machine | version | marked | gate released | gone | replaced by |\n| --- | --- | ---: | ---: | ---: | --- |\n")
	}
	for _, m := range machines {
		if !lb {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", m.Name, m.Version, rel(m.Marked), rel(m.Released), rel(m.Gone), m.ReplacedBy)
			continue
		}
		joined := rel(m.JoinedLB)
		if m.Created.IsZero() {
			joined = "at the start"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", m.Name, m.Version, joined, rel(m.Marked), rel(m.Released), rel(m.LeftLB), rel(m.Gone), m.ReplacedBy)
	}
	return b.String()
}
