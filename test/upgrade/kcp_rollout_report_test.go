package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/controllers/localinfra/localinfratest"
)

// kcpReport is out/upgrade-report-kcp.json: the real KubeadmControlPlane's
// steps as the watch saw them, the verifier rounds the FleetUpgrade
// controller ran, the records it kept and the tenant's load.
type kcpReport struct {
	Name        string    `json:"name"`
	Title       string    `json:"title"`
	From        string    `json:"from"`
	To          string    `json:"to"`
	MVPWired    bool      `json:"mvpWired"`
	Passed      bool      `json:"passed"`
	Outcome     string    `json:"outcome"`
	GeneratedAt time.Time `json:"generatedAt"`
	// DurationSeconds is the whole scenario's, ClusterReadySeconds how
	// long the cluster took to run at From.
	DurationSeconds     float64 `json:"durationSeconds"`
	ClusterReadySeconds float64 `json:"clusterReadySeconds"`
	FleetUpgrade        string  `json:"fleetUpgrade"`
	Phase               string  `json:"phase"`
	// CreatedAt and SucceededAt are the FleetUpgrade's, RolloutSeconds
	// the time between; KCPRolloutSeconds is from the first Machine
	// KubeadmControlPlane marked to the last new one in the load
	// balancer.
	CreatedAt         *float64        `json:"fleetUpgradeCreatedAtSeconds,omitempty"`
	SucceededAt       *float64        `json:"fleetUpgradeSucceededAtSeconds,omitempty"`
	RolloutSeconds    float64         `json:"rolloutSeconds"`
	KCPRolloutSeconds float64         `json:"kcpRolloutSeconds"`
	Skew              []string        `json:"skew"`
	Tenant            tenantSummary   `json:"tenant"`
	TenantScope       string          `json:"tenantScope"`
	Machines          []kcpMachineRow `json:"machines"`
	Rounds            []kcpRoundRow   `json:"verifierRounds"`
	RunID             string          `json:"runID"`
	RunState          string          `json:"runState"`
	Records           []kcpRecordRow  `json:"records"`
	Timeline          string          `json:"timeline"`

	svg string
}

// kcpMachineRow is one old control-plane Machine's way out and the new one
// that took its place; times are seconds from the tenant load's start.
type kcpMachineRow struct {
	Machine string `json:"machine"`
	Version string `json:"version"`
	// HookedAt: first seen carrying the gate's hook; MarkedAt:
	// KubeadmControlPlane marked it for deletion; ReleasedAt: the gate's
	// hook was gone from it; LeftLBAt: its apiserver left the load
	// balancer; GoneAt: the Machine was gone.
	HookedAt   *float64 `json:"hookedAtSeconds,omitempty"`
	MarkedAt   *float64 `json:"markedAtSeconds,omitempty"`
	ReleasedAt *float64 `json:"releasedAtSeconds,omitempty"`
	LeftLBAt   *float64 `json:"leftLoadBalancerAtSeconds,omitempty"`
	GoneAt     *float64 `json:"goneAtSeconds,omitempty"`
	// HeldSeconds is from the mark to the release: how long the gate held
	// a Machine KubeadmControlPlane wanted gone.
	HeldSeconds *float64 `json:"heldSeconds,omitempty"`
	// ReleasingRound is the index (from 1) in Rounds of the passing round
	// begun after the mark that let it go; 0 when none.
	ReleasingRound int `json:"releasingRound"`
	// New is the Machine KubeadmControlPlane created in its place (maxSurge
	// 0: after it was gone), NewCreatedAt when, NewJoinedAt when its
	// apiserver joined the load balancer.
	New          string   `json:"new,omitempty"`
	NewVersion   string   `json:"newVersion,omitempty"`
	NewCreatedAt *float64 `json:"newCreatedAtSeconds,omitempty"`
	NewJoinedAt  *float64 `json:"newJoinedAtSeconds,omitempty"`
}

// kcpRoundRow is one verifier round the FleetUpgrade controller ran.
type kcpRoundRow struct {
	StartedAt float64  `json:"startedAtSeconds"`
	Seconds   float64  `json:"seconds"`
	Targets   []string `json:"targets"`
	Passed    bool     `json:"passed"`
	Probes    int      `json:"probes"`
	Failed    []string `json:"failed,omitempty"`
	Findings  []string `json:"findings,omitempty"`
	Err       string   `json:"error,omitempty"`
	// Released are the Machines this round let go.
	Released []string `json:"released,omitempty"`
}

// kcpRecordRow is one step of the FleetUpgrade's run in the store.
type kcpRecordRow struct {
	Seq        int      `json:"seq"`
	Kind       string   `json:"kind"`
	Machine    string   `json:"machine,omitempty"`
	From       string   `json:"from,omitempty"`
	To         string   `json:"to,omitempty"`
	Outcome    string   `json:"outcome"`
	Message    string   `json:"message,omitempty"`
	StartedAt  float64  `json:"startedAtSeconds"`
	FinishedAt *float64 `json:"finishedAtSeconds,omitempty"`
	Probes     int      `json:"probes"`
}

func (sc *kcpScenario) at(t time.Time) *float64 {
	if t.IsZero() || sc.origin.IsZero() {
		return nil
	}
	return fptr(sc.since(t))
}

// report builds the scenario's report from what the watch, the verifier,
// the load and the store hold now.
func (sc *kcpScenario) report() *kcpReport {
	sc.mu.Lock()
	succeeded, status, finished := sc.succeeded, sc.fuStatus, sc.finished
	sc.mu.Unlock()
	if finished.IsZero() {
		finished = time.Now()
	}
	rep := &kcpReport{
		Name: "kcp",
		Title: fmt.Sprintf("%s → %s on the real Cluster API KubeadmControlPlane (maxSurge 0) with the local infrastructure provider, MVP wired, "+
			"under a FleetUpgrade driven by the FleetUpgrade controller and the real verifier: the gate's pre-drain hook holds each Machine "+
			"KubeadmControlPlane marks for deletion until a verification begun after the mark passed.", sc.from, sc.to),
		From: strings.TrimPrefix(sc.from, "v"), To: strings.TrimPrefix(sc.to, "v"), MVPWired: true,
		GeneratedAt: time.Now(), DurationSeconds: finished.Sub(sc.begun).Seconds(), Skew: gvrStrings(sc.skew),
		TenantScope: "CRUD of Apps and Routes and lists of the skew resources, as the tenant, through the cluster's load balancer; " +
			"no ClusterCapacities (the scheduler's aggregated API is not registered on a local cluster)",
		Timeline: "upgrade-kcp.svg", Phase: string(status.Phase),
	}
	if !sc.ready.IsZero() {
		rep.ClusterReadySeconds = sc.ready.Sub(sc.begun).Seconds()
	}
	if sc.fu != nil {
		rep.FleetUpgrade = sc.fu.Name
		rep.CreatedAt = sc.at(sc.created)
	}
	rep.SucceededAt = sc.at(succeeded)
	if !succeeded.IsZero() {
		rep.RolloutSeconds = succeeded.Sub(sc.created).Seconds()
	}
	var lives []localinfratest.MachineLife
	if sc.watch != nil {
		lives = sc.watch.Snapshot()
	}
	var rounds []verifierRound
	if sc.verifier != nil {
		rounds = sc.verifier.snapshot()
	}
	for _, r := range rounds {
		rep.Rounds = append(rep.Rounds, kcpRoundRow{StartedAt: sc.since(r.Start), Seconds: r.End.Sub(r.Start).Seconds(), Targets: r.Targets,
			Passed: r.Passed, Probes: r.Probes, Failed: r.Failed, Findings: r.Findings, Err: r.Err})
	}
	rep.Machines = sc.machineRows(lives, rounds, rep.Rounds)
	var firstMark, lastJoin time.Time
	for _, m := range lives {
		if m.Version == sc.from && !m.Marked.IsZero() && (firstMark.IsZero() || m.Marked.Before(firstMark)) {
			firstMark = m.Marked
		}
		if m.Version == sc.to && m.JoinedLB.After(lastJoin) {
			lastJoin = m.JoinedLB
		}
	}
	if !firstMark.IsZero() && lastJoin.After(firstMark) {
		rep.KCPRolloutSeconds = lastJoin.Sub(firstMark).Seconds()
	}
	if sc.load != nil {
		served := sc.servedAt(lives)
		rep.Tenant, _ = tallyTenant(sc.load.snapshot(), func(r tenantRequest) string { return classifyRequest(r, served) }, sc.since)
	}
	sc.readRecords(rep)
	switch {
	case rep.Phase == string(fleetv1.FleetUpgradePhaseSucceeded):
		rep.Outcome = fmt.Sprintf("FleetUpgrade Succeeded %.0f s after it was created; KubeadmControlPlane replaced %d machines in %.0f s",
			rep.RolloutSeconds, len(rep.Machines), rep.KCPRolloutSeconds)
	case rep.Phase != "":
		rep.Outcome = "FleetUpgrade " + rep.Phase
	case sc.fu != nil:
		rep.Outcome = "the FleetUpgrade did not succeed"
	default:
		rep.Outcome = "did not start"
	}
	rep.svg = sc.timelineSVG(lives, rounds)
	return rep
}

// machineRows pairs each old Machine, in the order KubeadmControlPlane
// marked them, with the first new Machine created after it was marked, and
// names the passing round that released it.
func (sc *kcpScenario) machineRows(lives []localinfratest.MachineLife, rounds []verifierRound, rows []kcpRoundRow) []kcpMachineRow {
	var out []kcpMachineRow
	taken := map[string]bool{}
	for _, m := range lives {
		if m.Version != sc.from {
			continue
		}
		row := kcpMachineRow{Machine: m.Name, Version: m.Version, HookedAt: sc.at(m.HookedAt), MarkedAt: sc.at(m.Marked),
			ReleasedAt: sc.at(m.Released), LeftLBAt: sc.at(m.LeftLB), GoneAt: sc.at(m.Gone)}
		if !m.Marked.IsZero() && !m.Released.IsZero() {
			row.HeldSeconds = fptr(m.Released.Sub(m.Marked).Seconds())
			for i := len(rounds) - 1; i >= 0; i-- {
				r := rounds[i]
				if r.Passed && !r.Start.Before(m.Marked.Add(-time.Second)) && !r.End.After(m.Released) {
					row.ReleasingRound = i + 1
					rows[i].Released = append(rows[i].Released, m.Name)
					break
				}
			}
		}
		if !m.Marked.IsZero() {
			for _, n := range lives {
				if n.Version == sc.to && !taken[n.Name] && !n.Created.Before(m.Marked.Truncate(time.Second)) {
					taken[n.Name] = true
					row.New, row.NewVersion, row.NewCreatedAt, row.NewJoinedAt = n.Name, n.Version, sc.at(n.Created), sc.at(n.JoinedLB)
					break
				}
			}
		}
		out = append(out, row)
	}
	return out
}

// readRecords reads the FleetUpgrade's run and its steps from the store.
func (sc *kcpScenario) readRecords(rep *kcpReport) {
	if sc.st == nil || sc.fu == nil || sc.fu.UID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runs, err := sc.st.UpgradeRunsByUID(ctx, []string{string(sc.fu.UID)})
	if err != nil {
		rep.RunState = "unreadable: " + err.Error()
		return
	}
	run, ok := runs[string(sc.fu.UID)]
	if !ok {
		rep.RunState = "no run recorded"
		return
	}
	rep.RunID, rep.RunState = run.ID, string(run.State)
	steps, err := sc.st.ListUpgradeSteps(ctx, run.ID)
	if err != nil {
		rep.RunState += " (steps unreadable: " + err.Error() + ")"
		return
	}
	for _, s := range steps {
		row := kcpRecordRow{Seq: s.Seq, Kind: s.Kind, Machine: s.Machine, From: s.FromVersion, To: s.ToVersion,
			Outcome: string(s.Outcome), Message: s.Message, StartedAt: sc.since(s.StartedAt)}
		if s.FinishedAt != nil {
			row.FinishedAt = sc.at(*s.FinishedAt)
		}
		if ps, err := sc.st.ListProbes(ctx, s.ID); err == nil {
			row.Probes = len(ps)
		}
		rep.Records = append(rep.Records, row)
	}
}

// write writes the JSON, the markdown and the timeline into dir and
// returns their paths.
func (r *kcpReport) write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	files := []struct {
		name string
		data []byte
	}{
		{"upgrade-report-kcp.json", append(data, '\n')},
		{"upgrade-report-kcp.md", []byte(r.markdown())},
		{r.Timeline, []byte(r.svg)},
	}
	var paths []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// machineTable renders the KubeadmControlPlane's steps as a markdown table.
func (r *kcpReport) machineTable() string {
	var b strings.Builder
	b.WriteString("| machine | gate hook on | KCP marked it | gate released it (held) | releasing round | left the load balancer | gone | replaced by | created | joined the load balancer |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |\n")
	for _, m := range r.Machines {
		round := "–"
		if m.ReleasingRound > 0 {
			round = fmt.Sprintf("#%d", m.ReleasingRound)
		}
		held := ""
		if m.HeldSeconds != nil {
			held = fmt.Sprintf(" (%.1f s)", *m.HeldSeconds)
		}
		by := "–"
		if m.New != "" {
			by = m.New + " " + m.NewVersion
		}
		fmt.Fprintf(&b, "| %s %s | %s | %s | %s%s | %s | %s | %s | %s | %s | %s |\n", m.Machine, m.Version, secs(m.HookedAt), secs(m.MarkedAt),
			secs(m.ReleasedAt), held, round, secs(m.LeftLBAt), secs(m.GoneAt), by, secs(m.NewCreatedAt), secs(m.NewJoinedAt))
	}
	return b.String()
}

// markdown renders out/upgrade-report-kcp.md.
func (r *kcpReport) markdown() string {
	var b strings.Builder
	result := "pass"
	if !r.Passed {
		result = "**FAIL**"
	}
	fmt.Fprintf(&b, "# Mixed-version suite: the real KubeadmControlPlane\n\nGenerated %s; the scenario took %.0f s (the cluster %.0f s to come up). "+
		"Times are seconds from the start of the tenant's load.\n\n## %s\n\n%s\n\n", r.GeneratedAt.Format(time.RFC3339), r.DurationSeconds,
		r.ClusterReadySeconds, r.Name, r.Title)
	fmt.Fprintf(&b, "Result: %s. Outcome: %s. Tenant: %d requests, %s failed, %d unserved 404s (no apiserver served the resource yet; not failures); "+
		"%d succeeded only after client-go's own retries (%d retries). The tenant's load: %s.\n\n",
		result, r.Outcome, r.Tenant.Requests, failuresByStatus(r.Tenant), r.Tenant.Unserved404, r.Tenant.Retried, r.Tenant.Retries, r.TenantScope)
	fmt.Fprintf(&b, "FleetUpgrade %s: created at %s, phase %s at %s (%.0f s). Skew resources (%s → %s): %s.\n\n", r.FleetUpgrade, secs(r.CreatedAt),
		orDash(r.Phase), secs(r.SucceededAt), r.RolloutSeconds, r.From, r.To, strings.Join(r.Skew, ", "))
	b.WriteString("KubeadmControlPlane's steps, per old Machine:\n\n")
	b.WriteString(r.machineTable())
	b.WriteString("\nThe FleetUpgrade controller's verifier rounds (every apiserver of the cluster, directly):\n\n")
	b.WriteString("| # | started | took | apiservers | verdict | released |\n| ---: | ---: | ---: | --- | --- | --- |\n")
	for i, rd := range r.Rounds {
		verdict := fmt.Sprintf("passed: %d probes", rd.Probes)
		switch {
		case rd.Err != "":
			verdict = "no verdict: " + rd.Err
		case !rd.Passed:
			verdict = fmt.Sprintf("failed: %d of %d probes: %s", len(rd.Failed), rd.Probes, strings.Join(rd.Failed, "; "))
		}
		if len(rd.Findings) > 0 {
			verdict += "; findings: " + strings.Join(rd.Findings, ", ")
		}
		fmt.Fprintf(&b, "| %d | %.1f s | %.1f s | %s | %s | %s |\n", i+1, rd.StartedAt, rd.Seconds, strings.Join(rd.Targets, ", "),
			strings.ReplaceAll(verdict, "|", "/"), orDash(strings.Join(rd.Released, ", ")))
	}
	fmt.Fprintf(&b, "\nRecords: run %s, state %s, %d steps:\n\n", orDash(r.RunID), orDash(r.RunState), len(r.Records))
	b.WriteString("| seq | kind | machine | from → to | outcome | finished | probes | message |\n| ---: | --- | --- | --- | --- | ---: | ---: | --- |\n")
	for _, s := range r.Records {
		fmt.Fprintf(&b, "| %d | %s | %s | %s → %s | %s | %s | %d | %s |\n", s.Seq, s.Kind, orDash(s.Machine), s.From, s.To, s.Outcome,
			secs(s.FinishedAt), s.Probes, strings.ReplaceAll(s.Message, "|", "/"))
	}
	if len(r.Tenant.FirstFailures) > 0 {
		b.WriteString("\nFirst tenant failures:\n\n```text\n")
		for _, f := range r.Tenant.FirstFailures {
			b.WriteString(f + "\n")
		}
		b.WriteString("```\n")
	}
	fmt.Fprintf(&b, "\n![timeline of %s](%s)\n", r.Name, r.Timeline)
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// timelineSVG draws one lane per Machine (its version as a bar while its
// apiserver is in the load balancer, faint before and after), with ticks
// where KubeadmControlPlane marked it and where the gate released it, a
// lane of the verifier rounds and one of the tenant's requests.
func (sc *kcpScenario) timelineSVG(lives []localinfratest.MachineLife, rounds []verifierRound) string {
	const left, right, top, laneH, width = 230.0, 20.0, 40.0, 28.0, 1200.0
	end := 1.0
	if sc.load != nil {
		sc.mu.Lock()
		end = math.Max(1, sc.since(sc.finished))
		sc.mu.Unlock()
	}
	plot := width - left - right
	x := func(sec float64) float64 { return left + math.Max(0, math.Min(sec, end))/end*plot }
	nLanes := len(lives) + 2
	height := top + float64(nLanes)*laneH + 64
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="#fff"/>` + "\n")
	fmt.Fprintf(&b, `<text x="10" y="18" font-size="13" font-weight="bold">kcp: %s → %s, the real KubeadmControlPlane</text>`+"\n", html.EscapeString(sc.from), html.EscapeString(sc.to))
	tick := niceTick(end)
	for s := 0.0; s <= end; s += tick {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eee"/>`, x(s), top-4, x(s), top+float64(nLanes)*laneH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#666">%gs</text>`+"\n", x(s), top-8, s)
	}
	bar := func(y, from, to float64, color string, op float64) {
		if to > from {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="12" fill="%s" fill-opacity="%.2f"/>`+"\n", x(from), y+4, x(to)-x(from), color, op)
		}
	}
	// tickAt labels the tick on its left (anchor "end") or right ("start").
	tickAt := func(y, sec float64, color, label, anchor string) {
		dx := 3.0
		if anchor == "end" {
			dx = -3
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="%s" stroke-width="2"/>`, x(sec), y+1, x(sec), y+laneH-3, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="%s" font-size="9" text-anchor="%s">%s</text>`+"\n", x(sec)+dx, y+laneH-2, color, anchor, label)
	}
	for i, m := range lives {
		y := top + float64(i)*laneH
		fmt.Fprintf(&b, `<text x="10" y="%.0f">%s</text>`+"\n", y+14, html.EscapeString(m.Name+" "+m.Version))
		color := versionColors[strings.TrimPrefix(m.Version, "v")]
		if color == "" {
			color = "#777"
		}
		start, gone := sc.since(m.Created), end
		if !m.Gone.IsZero() {
			gone = sc.since(m.Gone)
		}
		in, out := start, gone
		if !m.JoinedLB.IsZero() {
			in = sc.since(m.JoinedLB)
		}
		if !m.LeftLB.IsZero() {
			out = sc.since(m.LeftLB)
		}
		bar(y, start, in, color, 0.2)
		bar(y, in, out, color, 1)
		bar(y, out, gone, color, 0.2)
		if !m.Marked.IsZero() {
			tickAt(y, sc.since(m.Marked), "#ff7f0e", "marked", "end")
		}
		if !m.Released.IsZero() {
			tickAt(y, sc.since(m.Released), "#2e7d32", "released", "start")
		}
	}
	y := top + float64(len(lives))*laneH
	fmt.Fprintf(&b, `<text x="10" y="%.0f">verifier (FleetUpgrade controller)</text>`+"\n", y+14)
	for _, r := range rounds {
		color := markColors["ok"]
		if !r.Passed {
			color = markColors["404"]
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="8" fill="%s"/>`, x(sc.since(r.Start)), y+6, math.Max(2, x(sc.since(r.End))-x(sc.since(r.Start))), color)
	}
	y += laneH
	fmt.Fprintf(&b, `<text x="10" y="%.0f">tenant via load balancer</text>`+"\n", y+14)
	if sc.load != nil {
		seen := map[string]bool{}
		served := sc.servedAt(lives)
		for _, r := range sc.load.snapshot() {
			key := classifyRequest(r, served)
			switch key {
			case "ok", "unserved", "503", "error":
			case "spurious404":
				key = "404"
			default:
				key = "error"
			}
			id := fmt.Sprintf("%d/%s", int(x(sc.since(r.At))), key)
			if seen[id] {
				continue
			}
			seen[id] = true
			fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="2" height="8" fill="%s"/>`, int(x(sc.since(r.At))), y+laneH-11, markColors[key])
		}
	}
	ly := y + laneH + 30
	fmt.Fprintf(&b, `<text x="10" y="%.0f" fill="#666">bar: the machine's apiserver in the load balancer (faint: before it joined, after it left); orange tick: KubeadmControlPlane marked it; green tick: the gate released it; verifier: green passed, red failed</text>`, ly)
	fmt.Fprintf(&b, `<text x="10" y="%.0f" fill="#666">tenant: green ok, grey a 404 while no server in the load balancer served the resource (not a failure), red spurious 404, orange 503, dark red other failure</text>`, ly+14)
	b.WriteString("\n</svg>\n")
	return b.String()
}
