package upgrade

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"bex.co/bex/internal/upgrade/verify"
)

// suiteReport is out/upgrade-report.json.
type suiteReport struct {
	GeneratedAt     time.Time `json:"generatedAt"`
	DurationSeconds float64   `json:"durationSeconds"`
	// Skew maps "from→to" to the resources only the later version serves,
	// from the versions' nopeer discovery.
	Skew      map[string][]string `json:"skew"`
	Scenarios []*scenarioReport   `json:"scenarios"`
}

// scenarioReport is one scenario's figures.
type scenarioReport struct {
	Name            string          `json:"name"`
	Title           string          `json:"title"`
	From            string          `json:"from"`
	To              string          `json:"to"`
	MVPWired        bool            `json:"mvpWired"`
	Passed          bool            `json:"passed"`
	Outcome         string          `json:"outcome"`
	DurationSeconds float64         `json:"durationSeconds"`
	Tenant          tenantSummary   `json:"tenant"`
	Verifier        verifierSummary `json:"verifier"`
	Steps           []stepReport    `json:"steps"`
	Pauses          []pauseReport   `json:"pauses,omitempty"`
	Spurious404     *spuriousReport `json:"spurious404,omitempty"`
	Kill            *killReport     `json:"kill,omitempty"`
	Preflight       []string        `json:"preflightBlockers,omitempty"`
	Notes           []string        `json:"notes,omitempty"`
	Records         recordsSummary  `json:"records"`
	Timeline        string          `json:"timeline"`

	svg string
}

type tenantSummary struct {
	Requests int `json:"requests"`
	Failures int `json:"failures"`
	// FailuresByStatus counts failed requests by HTTP status ("error": no
	// answer).
	FailuresByStatus map[string]int `json:"failuresByStatus"`
	Spurious404      int            `json:"spurious404"`
	Status503        int            `json:"status503"`
	// Unserved404 are 404s for a skew resource while no apiserver served
	// it: what a single-version plane answers, not failures.
	Unserved404 int `json:"unserved404"`
	// Retried are requests that succeeded only after retries client-go
	// makes by itself (429 or 5xx with Retry-After, a broken GET), and
	// Retries how many such retries there were.
	Retried       int                  `json:"retried"`
	Retries       int                  `json:"retries"`
	ByKind        map[string]kindCount `json:"byKind"`
	FirstFailures []string             `json:"firstFailures,omitempty"`
}

type kindCount struct {
	Requests int `json:"requests"`
	Failures int `json:"failures"`
}

type verifierSummary struct {
	Rounds int `json:"rounds"`
	// Void rounds saw the servers change under them; Errored got no
	// verdict. Neither counts.
	Void        int `json:"void"`
	Errored     int `json:"errored"`
	Probes      int `json:"probes"`
	Spurious404 int `json:"spurious404"`
	Honest503   int `json:"honest503"`
	Errors      int `json:"errors"`
	Unserved    int `json:"unserved"`
}

type stepReport struct {
	Rollout    string  `json:"rollout"`
	Index      int     `json:"index"`
	Old        string  `json:"old"`
	OldVersion string  `json:"oldVersion"`
	New        string  `json:"new"`
	NewVersion string  `json:"newVersion"`
	Killed     bool    `json:"killed,omitempty"`
	StartedAt  float64 `json:"startedAtSeconds"`
	// OldGoneAt is when the old server's process ended.
	OldGoneAt float64 `json:"oldGoneAtSeconds"`
	ReadyAt   float64 `json:"readyAtSeconds"`
	// PeerSyncWait is how long the new server, once ready, waited for its
	// peers to list what it serves before it joined the load balancer
	// (ReadyAt is when it joined).
	PeerSyncWait float64 `json:"peerSyncWaitSeconds"`
	// Gate is the verdict of the gate's round after the step.
	Gate      string `json:"gate"`
	GateGreen bool   `json:"gateGreen"`
	// BackgroundRounds ran during the step; BackgroundFailed of them
	// failed on a resource the tenant uses.
	BackgroundRounds int      `json:"backgroundRounds"`
	BackgroundFailed int      `json:"backgroundFailed"`
	Findings         []string `json:"findings,omitempty"`
}

type pauseReport struct {
	AtSeconds     float64  `json:"atSeconds"`
	GateAtSeconds float64  `json:"gateAtSeconds"`
	Source        string   `json:"source"`
	Rollout       string   `json:"rollout"`
	Step          int      `json:"step"`
	Reason        string   `json:"reason"`
	Decision      string   `json:"decision"`
	ResumedAt     *float64 `json:"resumedAtSeconds,omitempty"`
}

// spuriousReport times the first spurious 404 against the first pause.
type spuriousReport struct {
	FirstByTenant   *float64 `json:"firstByTenantSeconds,omitempty"`
	FirstByVerifier *float64 `json:"firstByVerifierSeconds,omitempty"`
	PauseAt         *float64 `json:"pauseAtSeconds,omitempty"`
	// ToPause is from the earlier of the two firsts to the pause; the
	// others from each.
	ToPause             *float64 `json:"secondsToPause,omitempty"`
	ToPauseFromTenant   *float64 `json:"secondsToPauseFromTenant,omitempty"`
	ToPauseFromVerifier *float64 `json:"secondsToPauseFromVerifier,omitempty"`
	ToGateFromFirst     *float64 `json:"secondsToGateBlock,omitempty"`
}

// killReport is what a SIGKILL mid-rollout left.
type killReport struct {
	Killed      string   `json:"killed"`
	KilledAt    float64  `json:"killedAtSeconds"`
	Tenant503   int      `json:"tenant503"`
	Verifier503 int      `json:"verifier503"`
	First503    *float64 `json:"first503Seconds,omitempty"`
	Last503     *float64 `json:"last503Seconds,omitempty"`
	// Duration503 is from the first to the last 503 anyone saw after the
	// kill; zero when there was none.
	Duration503 float64 `json:"duration503Seconds"`
	// Window503 is from the kill to the last 503 anyone saw after it
	// (before WindowEnd): how long the dead peer's 503 trap lasted. Zero
	// when there was none.
	Window503 float64 `json:"window503Seconds"`
	// LeaseGoneAt is when the suite first saw the killed server's identity
	// lease gone, LeaseRemovedBy who removed it: "plane" (KillAPIServer,
	// at once) or "verifier" (a round with RemoveStaleLeases, once the
	// lease was StaleLeaseAfter unrenewed).
	LeaseGoneAt    *float64 `json:"leaseGoneAtSeconds,omitempty"`
	LeaseRemovedBy string   `json:"leaseRemovedBy,omitempty"`
	// LeaseRemovedAt is when a verifier round removed it.
	LeaseRemovedAt *float64 `json:"leaseRemovedAtSeconds,omitempty"`
	LeaseUnrenewed string   `json:"leaseUnrenewedWhenRemoved,omitempty"`
	RemovedLeases  []string `json:"removedLeases,omitempty"`
	// WindowEnd is when the next server left the load balancer after the
	// kill, or the end of the scenario: the counts above and below are of
	// what happened between the kill and then. Later 503s are the next
	// server's (its shutdown), not the dead one's.
	WindowEnd float64 `json:"windowEndSeconds"`
	// RoundsAfter are the verifier rounds that started a second or more
	// after the lease was gone, before WindowEnd; RoundsAfter503 of them
	// had a Honest503.
	RoundsAfter    int `json:"roundsAfterLeaseGone"`
	RoundsAfter503 int `json:"roundsAfterLeaseGoneWith503"`
}

type recordsSummary struct {
	RunID  string `json:"runID"`
	State  string `json:"state"`
	Steps  int    `json:"steps"`
	Probes int    `json:"probes"`
}

func fptr(f float64) *float64 { return &f }

func orNobody(s string) string {
	if s == "" {
		return "nobody (still there)"
	}
	return s
}

// classify says what a tenant request's answer was: "ok", "unserved" (a
// 404 for a skew resource no apiserver served then: not a failure), or the
// failure: "spurious404", "503", "error" (no answer) or the status.
func (h *harness) classify(r tenantRequest) string { return classifyRequest(r, h.servedAt) }

// classifyRequest is classify with servedAt saying whether a ready
// apiserver served a resource itself at a moment.
func classifyRequest(r tenantRequest, servedAt func(schema.GroupVersionResource, time.Time) bool) string {
	switch {
	case r.Status >= 200 && r.Status < 300:
		return "ok"
	case r.Status == 0:
		return "error"
	case r.Status == 404 && r.Skew && !servedAt(r.Resource, r.At):
		return "unserved"
	case r.Status == 404 && r.Skew:
		return "spurious404"
	}
	return strconv.Itoa(r.Status)
}

// buildReport computes the scenario's figures and draws its timeline.
func (h *harness) buildReport() *scenarioReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	rep := &scenarioReport{
		Name: h.sc.name, Title: h.sc.title, From: h.sc.from, To: h.sc.to, MVPWired: h.sc.wired,
		Outcome: h.outcome, DurationSeconds: h.finished.Sub(h.begun).Seconds(), Notes: h.notes,
		Timeline: "upgrade-" + h.sc.name + ".svg", Preflight: h.blockers,
	}
	// MVP is wired for the version bump when every server the bump
	// replaced was wired (scenario 4 wires it first).
	for _, s := range h.steps {
		if s.Rollout == "upgrade" {
			rep.MVPWired = true
			for _, l := range h.lanes {
				if l.Name == s.Step.Old && !l.Wired {
					rep.MVPWired = false
				}
			}
		}
	}

	reqs := h.load.snapshot()
	var firstTenant404 time.Time
	rep.Tenant, firstTenant404 = tallyTenant(reqs, h.classify, h.since)

	var firstVerifier404 time.Time
	for _, r := range h.rounds {
		rep.Verifier.Rounds++
		switch {
		case r.Err != "":
			rep.Verifier.Errored++
			continue
		case r.Void:
			rep.Verifier.Void++
			continue
		}
		for _, p := range r.Report.Probes {
			rep.Verifier.Probes++
			switch p.Outcome {
			case verify.Spurious404:
				rep.Verifier.Spurious404++
				if firstVerifier404.IsZero() || p.At.Before(firstVerifier404) {
					firstVerifier404 = p.At
				}
			case verify.Honest503:
				rep.Verifier.Honest503++
			case verify.Error:
				rep.Verifier.Errors++
			case verify.Unserved:
				rep.Verifier.Unserved++
			}
		}
	}

	for _, s := range h.steps {
		sr := stepReport{Rollout: s.Rollout, Index: s.Step.Index, Old: s.Step.Old, OldVersion: s.Step.OldVersion,
			New: s.Step.New, NewVersion: s.Step.NewVersion, Killed: s.Step.Killed, StartedAt: h.since(s.Started)}
		if !s.Ready.IsZero() {
			sr.ReadyAt = h.since(s.Ready)
		}
		for _, l := range h.lanes {
			if l.Name == s.Step.Old && !l.End.IsZero() {
				sr.OldGoneAt = h.since(l.End)
			}
			if l.Name == s.Step.New {
				sr.PeerSyncWait = l.PeerSyncWait.Seconds()
			}
		}
		for _, r := range h.rounds {
			if r.Rollout != s.Rollout || r.Step != s.Step.Index || !r.verdict() {
				continue
			}
			switch r.Source {
			case "gate":
				sr.Gate, sr.GateGreen = describe(r), r.green()
				sr.Findings = nil
				for _, f := range r.Report.Findings {
					sr.Findings = append(sr.Findings, f.Reason+": "+f.Message)
				}
			case "background":
				sr.BackgroundRounds++
				if !r.green() {
					sr.BackgroundFailed++
				}
			}
		}
		rep.Steps = append(rep.Steps, sr)
	}
	for _, p := range h.pauses {
		pr := pauseReport{AtSeconds: h.since(p.At), GateAtSeconds: h.since(p.GateAt), Source: p.Source, Rollout: p.Rollout,
			Step: p.Step, Reason: p.Reason, Decision: p.Decision}
		if !p.ResumedAt.IsZero() {
			pr.ResumedAt = fptr(h.since(p.ResumedAt))
		}
		rep.Pauses = append(rep.Pauses, pr)
	}

	if !firstTenant404.IsZero() || !firstVerifier404.IsZero() {
		sp := &spuriousReport{}
		first := firstTenant404
		if !firstTenant404.IsZero() {
			sp.FirstByTenant = fptr(h.since(firstTenant404))
		}
		if !firstVerifier404.IsZero() {
			sp.FirstByVerifier = fptr(h.since(firstVerifier404))
			if first.IsZero() || firstVerifier404.Before(first) {
				first = firstVerifier404
			}
		}
		if len(h.pauses) > 0 {
			p := h.pauses[0]
			sp.PauseAt = fptr(h.since(p.At))
			sp.ToPause = fptr(p.At.Sub(first).Seconds())
			sp.ToGateFromFirst = fptr(p.GateAt.Sub(first).Seconds())
			if !firstTenant404.IsZero() {
				sp.ToPauseFromTenant = fptr(p.At.Sub(firstTenant404).Seconds())
			}
			if !firstVerifier404.IsZero() {
				sp.ToPauseFromVerifier = fptr(p.At.Sub(firstVerifier404).Seconds())
			}
		}
		rep.Spurious404 = sp
	}
	rep.Kill = h.killReport(reqs)
	rep.svg = h.timelineSVG(reqs)
	return rep
}

// tallyTenant sums up the tenant's requests: classify says what each answer
// was, since places a moment on the scenario's clock. It also returns when
// the first spurious 404 came, zero when none did.
func tallyTenant(reqs []tenantRequest, classify func(tenantRequest) string, since func(time.Time) float64) (tenantSummary, time.Time) {
	t := tenantSummary{FailuresByStatus: map[string]int{}, ByKind: map[string]kindCount{}}
	var firstTenant404 time.Time
	for _, r := range reqs {
		c := classify(r)
		k := t.ByKind[r.Kind()]
		k.Requests++
		t.Requests++
		if r.Retries > 0 {
			t.Retried++
			t.Retries += r.Retries
		}
		switch c {
		case "ok":
		case "unserved":
			t.Unserved404++
		default:
			k.Failures++
			t.Failures++
			key := c
			if c == "spurious404" {
				key = "404"
				t.Spurious404++
				if firstTenant404.IsZero() || r.At.Before(firstTenant404) {
					firstTenant404 = r.At
				}
			}
			if r.Status == 503 {
				t.Status503++
			}
			t.FailuresByStatus[key]++
			if len(t.FirstFailures) < 12 || r.Status != 404 {
				t.FirstFailures = append(t.FirstFailures, fmt.Sprintf("%+.1fs %s %s (%s): %s", since(r.At), r.Worker, r.Kind(), c, r.Message))
			}
		}
		t.ByKind[r.Kind()] = k
	}
	return t, firstTenant404
}

// killReport times the 503s after a SIGKILL, and the stale lease's
// removal; nil when no step killed.
func (h *harness) killReport(reqs []tenantRequest) *killReport {
	var killed *lane
	for _, l := range h.lanes {
		if l.Killed {
			killed = l
		}
	}
	if killed == nil {
		return nil
	}
	k := &killReport{Killed: killed.Name, KilledAt: h.since(killed.End)}
	// The dead server's window ends when the next server leaves the load
	// balancer: 503s from then on are that server's (its shutdown), not
	// the dead one's.
	until := h.finished
	for _, l := range h.lanes {
		if l != killed && l.Leave.After(killed.End) && l.Leave.Before(until) {
			until = l.Leave
		}
	}
	k.WindowEnd = h.since(until)
	in := func(at time.Time) bool { return !at.Before(killed.End) && at.Before(until) }
	var first, last time.Time
	see := func(at time.Time) {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	for _, r := range reqs {
		if r.Status == 503 && in(r.At) {
			k.Tenant503++
			see(r.At)
		}
	}
	for _, r := range h.rounds {
		for _, p := range r.Report.Probes {
			if p.Outcome == verify.Honest503 && in(p.At) {
				k.Verifier503++
				see(p.At)
			}
		}
		for _, l := range r.Report.Leases {
			if !l.Removed {
				continue
			}
			k.RemovedLeases = append(k.RemovedLeases, fmt.Sprintf("%s (%s) at %+.1fs, unrenewed %s", l.Name, l.Hostname, h.since(r.Done), l.Unrenewed.Duration.Round(time.Second)))
			if l.Hostname == killed.Name && k.LeaseRemovedAt == nil {
				k.LeaseRemovedAt = fptr(h.since(r.Done))
				k.LeaseUnrenewed = l.Unrenewed.Duration.Round(time.Second).String()
			}
		}
	}
	if !first.IsZero() {
		k.First503, k.Last503 = fptr(h.since(first)), fptr(h.since(last))
		k.Duration503 = last.Sub(first).Seconds()
		k.Window503 = last.Sub(killed.End).Seconds()
	}
	if !killed.LeaseGone.IsZero() {
		k.LeaseGoneAt = fptr(h.since(killed.LeaseGone))
		k.LeaseRemovedBy = "plane"
		if k.LeaseRemovedAt != nil {
			k.LeaseRemovedBy = "verifier"
		}
		for _, r := range h.rounds {
			if r.Start.Before(killed.LeaseGone.Add(time.Second)) || !in(r.Start) || !r.verdict() {
				continue
			}
			k.RoundsAfter++
			if slices.ContainsFunc(r.Report.Probes, func(p verify.Probe) bool { return p.Outcome == verify.Honest503 }) {
				k.RoundsAfter503++
			}
		}
	}
	return k
}

// Colors of the timeline.
var (
	versionColors = map[string]string{"1.35.4": "#8e6cbf", "1.36.3": "#3b7dd8", "1.37.2": "#2a9d8f"}
	markColors    = map[string]string{
		"ok": "#2e7d32", "404": "#d62728", "503": "#ff7f0e", "error": "#6b0000", "unserved": "#9e9e9e",
	}
)

// markOf maps a probe outcome to a mark color key.
func markOf(o verify.Outcome) string {
	switch o {
	case verify.ServedLocally, verify.Proxied:
		return "ok"
	case verify.Spurious404:
		return "404"
	case verify.Honest503:
		return "503"
	case verify.Unserved:
		return "unserved"
	}
	return "error"
}

// timelineSVG draws one lane per apiserver (its version over time as a
// bar: faint while starting or draining, hatched-light when MVP is not
// wired) with the verifier's probes of it as marks, a lane of the tenant's
// requests, and the pauses. h.mu is held.
func (h *harness) timelineSVG(reqs []tenantRequest) string {
	const (
		left, right, top, laneH, width = 230.0, 20.0, 40.0, 28.0, 1200.0
	)
	end := h.since(h.finished)
	if end <= 0 {
		end = 1
	}
	plot := width - left - right
	x := func(sec float64) float64 { return left + math.Max(0, math.Min(sec, end))/end*plot }
	nLanes := len(h.lanes) + 1
	height := top + float64(nLanes)*laneH + 70
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="18" font-size="13" font-weight="bold">%s: %s → %s</text>`+"\n", html.EscapeString(h.sc.name), h.sc.from, h.sc.to)
	// Time axis.
	tick := niceTick(end)
	for s := 0.0; s <= end; s += tick {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eee"/>`, x(s), top-4, x(s), top+float64(nLanes)*laneH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#666">%gs</text>`+"\n", x(s), top-8, s)
	}
	marks := map[string]bool{}
	mark := func(row int, sec float64, key string) {
		px := int(x(sec))
		id := fmt.Sprintf("%d/%d/%s", row, px, key)
		if marks[id] || sec < 0 || sec > end {
			return
		}
		marks[id] = true
		y := top + float64(row)*laneH
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="2" height="8" fill="%s"/>`, px, y+laneH-11, markColors[key])
	}
	rowOf := map[string]int{}
	for i, l := range h.lanes {
		rowOf[l.Name] = i
		y := top + float64(i)*laneH
		label := l.Name + " " + l.Version
		if !l.Wired {
			label += " (MVP off)"
		}
		if l.Killed {
			label += " ✕"
		}
		fmt.Fprintf(&b, `<text x="10" y="%.0f">%s</text>`+"\n", y+14, html.EscapeString(label))
		color := versionColors[l.Version]
		if color == "" {
			color = "#777"
		}
		opacity := 1.0
		if !l.Wired {
			opacity = 0.5
		}
		endAt := end
		if !l.End.IsZero() {
			endAt = h.since(l.End)
		}
		bar := func(from, to, op float64) {
			if to <= from || to < 0 || from > end {
				return
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="12" fill="%s" fill-opacity="%.2f"/>`+"\n", x(from), y+4, x(to)-x(from), color, op)
		}
		ready, leave := h.since(l.Start), endAt
		if !l.Ready.IsZero() {
			ready = h.since(l.Ready)
		}
		if !l.Leave.IsZero() {
			leave = h.since(l.Leave)
		}
		bar(h.since(l.Start), ready, 0.2)
		bar(ready, leave, opacity)
		bar(leave, endAt, 0.2)
		if l.Killed {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="#b00" font-weight="bold">✕ SIGKILL</text>`+"\n", x(endAt)+3, y+14)
		}
	}
	tenantRow := len(h.lanes)
	fmt.Fprintf(&b, `<text x="10" y="%.0f">tenant via load balancer</text>`+"\n", top+float64(tenantRow)*laneH+14)
	for _, r := range h.rounds {
		if !r.verdict() {
			continue
		}
		for _, p := range r.Report.Probes {
			if row, ok := rowOf[p.APIServer]; ok {
				mark(row, h.since(p.At), markOf(p.Outcome))
			}
		}
	}
	for _, r := range reqs {
		key := h.classify(r)
		switch key {
		case "ok", "unserved":
		case "spurious404":
			key = "404"
		case "503":
		default:
			key = "error"
		}
		mark(tenantRow, h.since(r.At), key)
	}
	bottom := top + float64(nLanes)*laneH
	for _, p := range h.pauses {
		px := x(h.since(p.At))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#d62728" stroke-width="1.5" stroke-dasharray="4,3"/>`, px, top-2, px, bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="#d62728">pause (step %d, %s)</text>`+"\n", px+3, bottom+12, p.Step, html.EscapeString(p.Source))
		if !p.ResumedAt.IsZero() {
			rx := x(h.since(p.ResumedAt))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#2e7d32" stroke-width="1.5" stroke-dasharray="4,3"/>`, rx, top-2, rx, bottom)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="#2e7d32">resume</text>`+"\n", rx+3, bottom+24)
		}
	}
	// Legend.
	ly := bottom + 44
	lx := 10.0
	for _, v := range []string{"1.35.4", "1.36.3", "1.37.2"} {
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="14" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`, lx, ly-9, versionColors[v], lx+18, ly, v)
		lx += 70
	}
	for _, k := range []struct{ key, label string }{{"ok", "ok"}, {"404", "spurious 404"}, {"503", "503"}, {"error", "other failure"}, {"unserved", "unserved (not a failure)"}} {
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="3" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`, lx, ly-9, markColors[k.key], lx+7, ly, k.label)
		lx += float64(len(k.label))*6 + 24
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#666">faint bar: starting or draining; pale: MVP off</text>`, lx, ly)
	b.WriteString("\n</svg>\n")
	return b.String()
}

// niceTick picks an axis step that gives at most about 15 ticks.
func niceTick(span float64) float64 {
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300} {
		if span/s <= 15 {
			return s
		}
	}
	return 600
}

// write writes the JSON, the markdown and the timelines into dir and
// returns their paths.
func (r *suiteReport) write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, "upgrade-report.json")
	if err := os.WriteFile(p, append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	paths = append(paths, p)
	p = filepath.Join(dir, "upgrade-report.md")
	if err := os.WriteFile(p, []byte(r.markdown()), 0o644); err != nil {
		return nil, err
	}
	paths = append(paths, p)
	for _, s := range r.Scenarios {
		if s.svg == "" {
			continue
		}
		p := filepath.Join(dir, s.Timeline)
		if err := os.WriteFile(p, []byte(s.svg), 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func secs(f *float64) string {
	if f == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f s", *f)
}

// summaryTable renders the markdown table of the scenarios.
func (r *suiteReport) summaryTable() string {
	var b strings.Builder
	b.WriteString("| scenario | upgrade | MVP | result | tenant requests | tenant failures | spurious 404 (tenant / verifier) | 503 (tenant / verifier) | gates green | first 404 → pause | 503s lasted | duration |\n")
	b.WriteString("| --- | --- | --- | --- | ---: | --- | --- | --- | --- | --- | --- | ---: |\n")
	for _, s := range r.Scenarios {
		green := 0
		for _, st := range s.Steps {
			if st.GateGreen {
				green++
			}
		}
		toPause := "–"
		if s.Spurious404 != nil && s.Spurious404.ToPause != nil {
			toPause = secs(s.Spurious404.ToPause)
		}
		lasted := "–"
		if s.Kill != nil {
			lasted = fmt.Sprintf("%.1f s", s.Kill.Window503)
			if s.Kill.Tenant503+s.Kill.Verifier503 == 0 {
				lasted = "none"
			}
		}
		result := "pass"
		if !s.Passed {
			result = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %s → %s | %s | %s: %s | %d | %s | %d / %d | %d / %d | %d of %d | %s | %s | %.0f s |\n",
			s.Name, s.From, s.To, wiredWord(s.MVPWired), result, s.Outcome, s.Tenant.Requests, failuresByStatus(s.Tenant),
			s.Tenant.Spurious404, s.Verifier.Spurious404, s.Tenant.Status503, s.Verifier.Honest503,
			green, len(s.Steps), toPause, lasted, s.DurationSeconds)
	}
	return b.String()
}

func failuresByStatus(t tenantSummary) string {
	if t.Failures == 0 {
		return "0"
	}
	var keys []string
	for k := range t.FailuresByStatus {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d×%s", t.FailuresByStatus[k], k))
	}
	return fmt.Sprintf("%d (%s)", t.Failures, strings.Join(parts, ", "))
}

// markdown renders out/upgrade-report.md.
func (r *suiteReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Mixed-version suite report\n\nGenerated %s; the suite took %.0f s. Times are seconds from the start of the tenant's load.\n\n",
		r.GeneratedAt.Format(time.RFC3339), r.DurationSeconds)
	b.WriteString(r.summaryTable())
	var pairs []string
	for k := range r.Skew {
		pairs = append(pairs, k)
	}
	sort.Strings(pairs)
	b.WriteString("\nSkew resources (nopeer discovery of the real binaries):\n\n")
	for _, k := range pairs {
		fmt.Fprintf(&b, "- %s: %s\n", k, strings.Join(r.Skew[k], ", "))
	}
	for _, s := range r.Scenarios {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", s.Name, s.Title)
		fmt.Fprintf(&b, "Outcome: %s. Tenant: %d requests, %s failed, %d unserved 404s (no apiserver served the resource yet; not failures).\n\n",
			s.Outcome, s.Tenant.Requests, failuresByStatus(s.Tenant), s.Tenant.Unserved404)
		if len(s.Preflight) > 0 {
			b.WriteString("Preflight blockers:\n\n")
			for _, f := range s.Preflight {
				fmt.Fprintf(&b, "- %s\n", f)
			}
			b.WriteString("\n")
		}
		if len(s.Steps) > 0 {
			b.WriteString("| rollout | step | replaced | by | started | old gone | new joined (waited for peers) | gate verdict | background rounds (failed) |\n| --- | ---: | --- | --- | ---: | ---: | ---: | --- | --- |\n")
			for _, st := range s.Steps {
				killed := ""
				if st.Killed {
					killed = " (SIGKILL)"
				}
				fmt.Fprintf(&b, "| %s | %d | %s %s%s | %s %s | %.1f s | %.1f s | %.1f s (%.2f s) | %s | %d (%d) |\n", st.Rollout, st.Index, st.Old, st.OldVersion, killed,
					st.New, st.NewVersion, st.StartedAt, st.OldGoneAt, st.ReadyAt, st.PeerSyncWait, strings.ReplaceAll(st.Gate, "|", "/"), st.BackgroundRounds, st.BackgroundFailed)
			}
			b.WriteString("\n")
		}
		for _, p := range s.Pauses {
			fmt.Fprintf(&b, "- Paused at %.1f s after step %d (%s; the gate blocked at %.1f s): %s. Decision: %s.\n", p.AtSeconds, p.Step, p.Source, p.GateAtSeconds, p.Reason, p.Decision)
		}
		if sp := s.Spurious404; sp != nil {
			fmt.Fprintf(&b, "- First spurious 404: tenant %s, verifier %s; pause %s; first 404 → pause %s (from the tenant's %s, from the verifier's %s).\n",
				secs(sp.FirstByTenant), secs(sp.FirstByVerifier), secs(sp.PauseAt), secs(sp.ToPause), secs(sp.ToPauseFromTenant), secs(sp.ToPauseFromVerifier))
		}
		if k := s.Kill; k != nil {
			fmt.Fprintf(&b, "- SIGKILL of %s at %.1f s: until the next server left the load balancer (%.1f s), %d tenant 503s, %d verifier Honest503s; 503s from %s to %s (%.1f s after the kill); its identity lease gone at %s, removed by the %s",
				k.Killed, k.KilledAt, k.WindowEnd, k.Tenant503, k.Verifier503, secs(k.First503), secs(k.Last503), k.Window503, secs(k.LeaseGoneAt), orNobody(k.LeaseRemovedBy))
			if k.LeaseRemovedAt != nil {
				fmt.Fprintf(&b, " (round done at %s, unrenewed %s)", secs(k.LeaseRemovedAt), k.LeaseUnrenewed)
			}
			fmt.Fprintf(&b, "; %d verifier rounds started a second or more after, %d of them with a Honest503.\n", k.RoundsAfter, k.RoundsAfter503)
		}
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		if len(s.Tenant.FirstFailures) > 0 {
			b.WriteString("\nFirst tenant failures:\n\n```text\n")
			for _, f := range s.Tenant.FirstFailures {
				b.WriteString(f + "\n")
			}
			b.WriteString("```\n")
		}
		fmt.Fprintf(&b, "\nRecords: run %s, state %s, %d steps, %d probe samples.\n", s.Records.RunID, s.Records.State, s.Records.Steps, s.Records.Probes)
		if s.svg != "" {
			fmt.Fprintf(&b, "\n![timeline of %s](%s)\n", s.Name, s.Timeline)
		}
	}
	return b.String()
}
