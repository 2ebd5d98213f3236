package dashboard

import (
	"cmp"
	"fmt"
	"html/template"
	"maps"
	"slices"
	"strings"
	"time"

	"bex.co/bex/web/api/apiclient"
)

// The pictures are SVG made on the server, with presentation attributes
// only (the pages' Content-Security-Policy allows no inline style).

// svgBuilder writes an SVG document.
type svgBuilder struct {
	b strings.Builder
}

func (s *svgBuilder) f(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

func (s *svgBuilder) text(x, y float64, anchor, fill string, size int, text string) {
	s.f(`<text x="%.1f" y="%.1f" text-anchor="%s" fill="%s" font-size="%d">%s</text>`, x, y, anchor, fill, size, template.HTMLEscapeString(text))
}

func (s *svgBuilder) html() template.HTML { return template.HTML(s.b.String()) }

// outcomeColors are the colors of the verifier's probe outcomes.
var outcomeColors = map[string]string{
	"ServedLocally": "#2e7d32", "Proxied": "#1565c0", "Unserved": "#9e9e9e",
	"Spurious404": "#c62828", "Honest503": "#ef6c00", "Error": "#6a1b9a",
}

// outcomeRank orders outcomes from the least to the most telling: a mark
// shows the highest of its apiserver's probes in the round.
var outcomeRank = map[string]int{"ServedLocally": 0, "Unserved": 1, "Proxied": 2, "Honest503": 3, "Spurious404": 4, "Error": 5}

// versionColors are the colors of the Kubernetes versions on a timeline,
// in version order.
var versionColors = []string{"#9fc5e8", "#b6d7a8", "#f9cb9c", "#d5a6bd", "#ffe599"}

// timelineRow is one apiserver of one cluster on the timeline.
type timelineRow struct {
	cluster, server string
	segs            []timelineSeg
	marks           []timelineMark
}

type timelineSeg struct {
	from, to time.Time
	version  string
}

type timelineMark struct {
	at      time.Time
	outcome string
	title   string
}

// timelineRows computes, from the steps the run recorded, which apiserver
// ran which version when, and each verifier round's outcome on each: an
// apiserver that no machine step brought is one of the old machines, on
// the cluster's old version from the run's start; one brought by a machine
// step runs its new version from when it joined; an apiserver ends at the
// first round that no longer probed it.
func timelineRows(u apiclient.Upgrade, t1 time.Time) []timelineRow {
	if u.Run == nil {
		return nil
	}
	t0 := u.Run.StartedAt
	fromVersion := map[string]string{}
	joined := map[string]map[string]timelineSeg{} // cluster -> server -> its segment
	for _, cs := range u.Clusters {
		fromVersion[cs.Name] = cs.FromVersion
		for _, st := range cs.Steps {
			if joined[cs.Name] == nil {
				joined[cs.Name] = map[string]timelineSeg{}
			}
			from := t0
			if st.StartedAt != nil {
				from = *st.StartedAt
			}
			joined[cs.Name][st.Machine] = timelineSeg{from: from, version: st.NewVersion}
		}
	}
	var clusters []string
	rounds := map[string][]apiclient.UpgradeRecordedStep{}
	for _, st := range u.Run.Steps {
		if !slices.Contains(clusters, st.Cluster) {
			clusters = append(clusters, st.Cluster)
		}
		if fromVersion[st.Cluster] == "" && st.FromVersion != "" {
			fromVersion[st.Cluster] = st.FromVersion
		}
		switch st.Kind {
		case "machine":
			if joined[st.Cluster] == nil {
				joined[st.Cluster] = map[string]timelineSeg{}
			}
			if _, ok := joined[st.Cluster][st.Machine]; !ok {
				joined[st.Cluster][st.Machine] = timelineSeg{from: st.StartedAt, version: st.ToVersion}
			}
		case "verify":
			if len(st.ProbesByAPIServer) > 0 {
				rounds[st.Cluster] = append(rounds[st.Cluster], st)
			}
		}
	}
	var rows []timelineRow
	for _, cl := range clusters {
		servers := map[string]bool{}
		for _, r := range rounds[cl] {
			for s := range r.ProbesByAPIServer {
				servers[s] = true
			}
		}
		for s := range joined[cl] {
			servers[s] = true
		}
		var clRows []timelineRow
		for s := range servers {
			row := timelineRow{cluster: cl, server: s}
			seg, isNew := joined[cl][s]
			if !isNew {
				seg = timelineSeg{from: t0, version: fromVersion[cl]}
			}
			seg.to = t1
			last := -1
			for i, r := range rounds[cl] {
				counts, ok := r.ProbesByAPIServer[s]
				if ok {
					last = i
					row.marks = append(row.marks, mark(r.StartedAt, counts))
				}
			}
			if last >= 0 && last+1 < len(rounds[cl]) {
				seg.to = rounds[cl][last+1].StartedAt
			}
			row.segs = []timelineSeg{seg}
			clRows = append(clRows, row)
		}
		slices.SortFunc(clRows, func(a, b timelineRow) int {
			return cmp.Or(a.segs[0].from.Compare(b.segs[0].from), strings.Compare(a.server, b.server))
		})
		rows = append(rows, clRows...)
	}
	return rows
}

func mark(at time.Time, counts map[string]int) timelineMark {
	m := timelineMark{at: at, outcome: "ServedLocally"}
	var parts []string
	for _, o := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", o, counts[o]))
		if outcomeRank[o] > outcomeRank[m.outcome] {
			m.outcome = o
		}
	}
	m.title = at.UTC().Format("15:04:05") + ": " + strings.Join(parts, ", ")
	return m
}

// timeline draws the upgrade's timeline: a row per apiserver, colored by
// the version it runs, with a mark per verifier round colored by the
// round's most telling probe outcome on that apiserver.
func timeline(u apiclient.Upgrade, now time.Time) template.HTML {
	if u.Run == nil {
		return ""
	}
	t0, t1 := u.Run.StartedAt, now
	if u.Run.FinishedAt != nil {
		t1 = *u.Run.FinishedAt
	}
	rows := timelineRows(u, t1)
	if len(rows) == 0 {
		return ""
	}
	if !t1.After(t0) {
		t1 = t0.Add(time.Second)
	}
	const width, left, right, top, rowH = 960.0, 220.0, 16.0, 24.0, 28.0
	plotW := width - left - right
	x := func(t time.Time) float64 {
		return left + plotW*float64(t.Sub(t0))/float64(t1.Sub(t0))
	}
	var versions []string
	for _, r := range rows {
		for _, s := range r.segs {
			if s.version != "" && !slices.Contains(versions, s.version) {
				versions = append(versions, s.version)
			}
		}
	}
	slices.Sort(versions)
	colorOf := func(v string) string {
		i := slices.Index(versions, v)
		if i < 0 {
			return "#eeeeee"
		}
		return versionColors[i%len(versionColors)]
	}
	height := top + rowH*float64(len(rows)) + 64
	s := &svgBuilder{}
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" class="chart timeline" role="img" aria-label="Versions and probe outcomes per apiserver over time">`, width, height)
	s.f(`<rect x="0" y="0" width="%.0f" height="%.0f" fill="#ffffff"/>`, width, height)
	for i := 0; i <= 4; i++ {
		t := t0.Add(time.Duration(float64(t1.Sub(t0)) * float64(i) / 4))
		xx := x(t)
		s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`, xx, top-6, xx, top+rowH*float64(len(rows)))
		s.text(xx, top-10, "middle", "#666666", 11, "+"+t.Sub(t0).Round(time.Second).String())
	}
	for i, r := range rows {
		y := top + rowH*float64(i)
		s.text(left-8, y+rowH/2+4, "end", "#222222", 12, r.cluster+" · "+r.server)
		for _, seg := range r.segs {
			x0, x1 := x(seg.from), x(seg.to)
			if x0 < left {
				x0 = left
			}
			s.f(`<rect class="segment" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" rx="3"><title>%s %s from +%s</title></rect>`,
				x0, y+4, max(x1-x0, 1), rowH-8, colorOf(seg.version), template.HTMLEscapeString(r.server), template.HTMLEscapeString(seg.version), seg.from.Sub(t0).Round(time.Second))
		}
		for _, m := range r.marks {
			s.f(`<rect class="probe probe-%s" x="%.1f" y="%.1f" width="6" height="%.1f" fill="%s"><title>%s</title></rect>`,
				m.outcome, x(m.at)-3, y+7, rowH-14, outcomeColors[m.outcome], template.HTMLEscapeString(m.title))
		}
	}
	ly := top + rowH*float64(len(rows)) + 24
	lx := left
	for _, v := range versions {
		s.f(`<rect x="%.1f" y="%.1f" width="14" height="10" fill="%s"/>`, lx, ly-9, colorOf(v))
		s.text(lx+18, ly, "start", "#222222", 11, v)
		lx += 30 + 7*float64(len(v))
	}
	lx, ly = left, ly+22
	for _, o := range []string{"ServedLocally", "Proxied", "Unserved", "Spurious404", "Honest503", "Error"} {
		s.f(`<rect x="%.1f" y="%.1f" width="6" height="10" fill="%s"/>`, lx, ly-9, outcomeColors[o])
		s.text(lx+10, ly, "start", "#222222", 11, o)
		lx += 24 + 7*float64(len(o))
	}
	s.f(`</svg>`)
	return s.html()
}

// buildChart draws the app's last 20 builds' durations, oldest left.
func buildChart(builds []apiclient.Build, now time.Time) template.HTML {
	if len(builds) == 0 {
		return ""
	}
	bs := slices.Clone(builds[:min(len(builds), 20)])
	slices.Reverse(bs)
	dur := func(b apiclient.Build) time.Duration {
		end := now
		if b.FinishedAt != nil {
			end = *b.FinishedAt
		}
		return max(end.Sub(b.StartedAt), 0)
	}
	var longest time.Duration
	for _, b := range bs {
		longest = max(longest, dur(b))
	}
	longest = max(longest, time.Second)
	const width, height, left, bottom, top = 480.0, 160.0, 44.0, 22.0, 12.0
	plotH := height - bottom - top
	barW := min((width-left-8)/float64(len(bs)), 40)
	s := &svgBuilder{}
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" class="chart" role="img" aria-label="Build durations">`, width, height)
	s.text(left-6, top+8, "end", "#666666", 10, longest.Round(time.Second).String())
	s.text(left-6, height-bottom, "end", "#666666", 10, "0s")
	s.f(`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#cccccc"/>`, left, height-bottom, width-8, height-bottom)
	colors := map[string]string{"succeeded": "#2e7d32", "failed": "#c62828", "running": "#1565c0"}
	for i, b := range bs {
		h := plotH * float64(dur(b)) / float64(longest)
		xx := left + barW*float64(i) + 2
		s.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>build %d: %s, %s</title></rect>`,
			xx, height-bottom-h, max(barW-4, 1), max(h, 1), cmp.Or(colors[b.Status], "#9e9e9e"), b.Number, b.Status, dur(b).Round(time.Second))
		s.text(xx+barW/2-2, height-6, "middle", "#666666", 10, fmt.Sprint(b.Number))
	}
	s.f(`</svg>`)
	return s.html()
}

// trafficChart draws an app's request rate and error rate over time.
func trafficChart(points []TrafficPoint) template.HTML {
	if len(points) < 2 {
		return ""
	}
	t0, t1 := points[0].At, points[len(points)-1].At
	if !t1.After(t0) {
		return ""
	}
	var peak float64
	for _, p := range points {
		peak = max(peak, p.Requests)
	}
	peak = max(peak, 1)
	const width, height, left, right, bottom, top = 480.0, 160.0, 44.0, 44.0, 22.0, 12.0
	plotW, plotH := width-left-right, height-bottom-top
	x := func(t time.Time) float64 { return left + plotW*float64(t.Sub(t0))/float64(t1.Sub(t0)) }
	var reqs, errs []string
	for _, p := range points {
		reqs = append(reqs, fmt.Sprintf("%.1f,%.1f", x(p.At), top+plotH*(1-p.Requests/peak)))
		errs = append(errs, fmt.Sprintf("%.1f,%.1f", x(p.At), top+plotH*(1-p.Errors)))
	}
	s := &svgBuilder{}
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" class="chart" role="img" aria-label="Requests per second and error rate">`, width, height)
	s.f(`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#cccccc"/>`, left, height-bottom, width-right, height-bottom)
	s.text(left-6, top+8, "end", "#1565c0", 10, fmt.Sprintf("%.3g/s", peak))
	s.text(width-right+6, top+8, "start", "#c62828", 10, "100%")
	s.text(left-6, height-bottom, "end", "#666666", 10, "0")
	s.f(`<polyline fill="none" stroke="#1565c0" stroke-width="2" points="%s"/>`, strings.Join(reqs, " "))
	s.f(`<polyline fill="none" stroke="#c62828" stroke-width="1.5" points="%s"/>`, strings.Join(errs, " "))
	s.text(left, height-6, "start", "#666666", 10, "-"+t1.Sub(t0).Round(time.Second).String())
	s.text(width-right, height-6, "end", "#666666", 10, "now")
	s.f(`</svg>`)
	return s.html()
}

// metricChart is one chart of an app's series, with its caption.
type metricChart struct {
	Caption string
	SVG     template.HTML
}

// chartLine is one line of a series chart: its color and its value at a
// point, nil where not measured (the line breaks there).
type chartLine struct {
	color string
	value func(apiclient.MetricPoint) *float64
}

// metricsCharts draws an app's series (GET /apps/{app}/metrics): CPU,
// memory, restarts, and the edge's p50 and p99 latency; a chart whose
// values were never measured is left out.
func metricsCharts(m apiclient.AppMetrics) []metricChart {
	f := func(v float64) *float64 { return &v }
	var out []metricChart
	for _, c := range []struct {
		caption, aria string
		unit          func(float64) string
		lines         []chartLine
	}{
		{"CPU (cores)", "CPU in cores", func(v float64) string { return fmt.Sprintf("%.2f", v) },
			[]chartLine{{"#1565c0", func(p apiclient.MetricPoint) *float64 { return p.CPUCores }}}},
		{"Memory", "Memory in MiB", func(v float64) string { return fmt.Sprintf("%.0fMiB", v/(1<<20)) },
			[]chartLine{{"#2e7d32", func(p apiclient.MetricPoint) *float64 {
				if p.MemoryBytes == nil {
					return nil
				}
				return f(float64(*p.MemoryBytes))
			}}}},
		{"Restarts per interval", "Restarts of crashed instances", func(v float64) string { return fmt.Sprintf("%.0f", v) },
			[]chartLine{{"#ef6c00", func(p apiclient.MetricPoint) *float64 { return f(float64(p.Restarts)) }}}},
		{"Latency at the edge: p50 (blue) and p99 (red)", "Request latency p50 and p99", func(v float64) string { return fmt.Sprintf("%.0fms", v*1000) },
			[]chartLine{
				{"#1565c0", func(p apiclient.MetricPoint) *float64 { return p.P50Seconds }},
				{"#c62828", func(p apiclient.MetricPoint) *float64 { return p.P99Seconds }},
			}},
	} {
		if svg := seriesChart(m.Points, c.lines, c.unit, c.aria); svg != "" {
			out = append(out, metricChart{Caption: c.caption, SVG: svg})
		}
	}
	return out
}

// seriesChart draws lines over points from 0 to their peak; "" when fewer
// than two points or no value at all.
func seriesChart(points []apiclient.MetricPoint, lines []chartLine, unit func(float64) string, aria string) template.HTML {
	if len(points) < 2 {
		return ""
	}
	t0, t1 := points[0].Time, points[len(points)-1].Time
	if !t1.After(t0) {
		return ""
	}
	peak, measured := 0.0, false
	for _, l := range lines {
		for _, p := range points {
			if v := l.value(p); v != nil {
				peak, measured = max(peak, *v), true
			}
		}
	}
	if !measured {
		return ""
	}
	if peak <= 0 {
		peak = 1
	}
	const width, height, left, right, bottom, top = 480.0, 140.0, 56.0, 12.0, 22.0, 12.0
	plotW, plotH := width-left-right, height-bottom-top
	x := func(t time.Time) float64 { return left + plotW*float64(t.Sub(t0))/float64(t1.Sub(t0)) }
	s := &svgBuilder{}
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" class="chart" role="img" aria-label="%s">`, width, height, template.HTMLEscapeString(aria))
	s.f(`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#cccccc"/>`, left, height-bottom, width-right, height-bottom)
	s.text(left-6, top+8, "end", "#666666", 10, unit(peak))
	s.text(left-6, height-bottom, "end", "#666666", 10, unit(0))
	for _, l := range lines {
		var run []string
		flush := func() {
			if len(run) > 0 {
				s.f(`<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, l.color, strings.Join(run, " "))
			}
			run = nil
		}
		for _, p := range points {
			v := l.value(p)
			if v == nil {
				flush()
				continue
			}
			run = append(run, fmt.Sprintf("%.1f,%.1f", x(p.Time), top+plotH*(1-*v/peak)))
		}
		flush()
	}
	s.text(left, height-6, "start", "#666666", 10, "-"+t1.Sub(t0).Round(time.Second).String())
	s.text(width-right, height-6, "end", "#666666", 10, "now")
	s.f(`</svg>`)
	return s.html()
}
