package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// machine says where and how a run was made.
type machine struct {
	Date        string `json:"date"`
	OS          string `json:"os"`
	CPUs        int    `json:"cpus"`
	CPUModel    string `json:"cpuModel"`
	GOMAXPROCS  int    `json:"gomaxprocs"`
	GoVersion   string `json:"goVersion"`
	LoadBefore  string `json:"loadAverageBefore"`
	LoadAfter   string `json:"loadAverageAfter"`
	Concurrency int    `json:"concurrency"`
	Warmup      string `json:"warmup"`
	Duration    string `json:"duration"`
	Rounds      int    `json:"rounds"`
	EdgeMetrics bool   `json:"edgeMetrics"`
}

func describeMachine(o *options) machine {
	return machine{
		Date: time.Now().Format("2006-01-02 15:04"), OS: runtime.GOOS + "/" + runtime.GOARCH,
		CPUs: runtime.NumCPU(), CPUModel: cpuModel(), GOMAXPROCS: o.gomaxprocs, GoVersion: runtime.Version(),
		LoadBefore: loadAverage(), Concurrency: o.concurrency, Warmup: o.warmup.String(), Duration: o.duration.String(),
		Rounds: o.rounds, EdgeMetrics: o.edgeMetrics,
	}
}

// loadAverage returns the 1-minute load average, "?" where there is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// summary is a scenario's medians over rounds.
type summary struct {
	RPS    float64       `json:"requestsPerSecond"`
	P50    time.Duration `json:"p50Ns"`
	P99    time.Duration `json:"p99Ns"`
	Errors int           `json:"errors"` // summed over rounds
	// CPU is the median CPU time per request, in microseconds, by role.
	CPU   map[string]float64 `json:"cpuMicrosPerRequest,omitempty"`
	Cores float64            `json:"cores,omitempty"`
}

type scenarioResult struct {
	Name   string        `json:"name"`
	Rounds []measurement `json:"rounds"`
	Median summary       `json:"median"`
}

// ratio is one comparison: a throughput ratio (Value) or latency a proxy
// adds over direct (Added), for one body.
type ratio struct {
	Name  string        `json:"name"`
	Body  string        `json:"body"`
	Value float64       `json:"value,omitempty"`
	Added time.Duration `json:"addedNs,omitempty"`
	// ByRound is a throughput or CPU ratio within each round, where the
	// two scenarios ran minutes apart at most: on a machine whose speed
	// drifts during a run, their spread says how far the medians' ratio
	// can be trusted.
	ByRound []float64 `json:"byRound,omitempty"`
	kind    int
}

const (
	throughput = iota
	addedLatency
)

type report struct {
	Machine   machine          `json:"machine"`
	Scenarios []scenarioResult `json:"scenarios"`
	Ratios    []ratio          `json:"ratios"`
	bodies    []string
	proxies   []string
}

func newReport(o *options, m machine, proxies []string, scenarios []scenario, res [][]measurement) *report {
	r := &report{Machine: m, proxies: proxies}
	by := map[string]summary{}
	rounds := map[string][]measurement{}
	for i, sc := range scenarios {
		s := summarize(res[i])
		r.Scenarios = append(r.Scenarios, scenarioResult{Name: sc.name, Rounds: res[i], Median: s})
		by[sc.name] = s
		rounds[sc.name] = res[i]
	}
	bodies := []string{""}
	if o.large {
		bodies = append(bodies, " 16k")
	}
	for _, suffix := range bodies {
		label := fmt.Sprintf("%d B", len(smallBody))
		if suffix != "" {
			label = "16 KiB"
		}
		r.bodies = append(r.bodies, label)
		get := func(name string) summary { return by[name+suffix] }
		d := get(direct)
		// add compares scenario a with b: their throughput, or with cpu
		// their proxies' CPU per request.
		add := func(name, a, b string, cpu bool) {
			of := func(m measurement) float64 { return m.RPS }
			x := ratio{Name: name, Body: label, Value: div(get(a).RPS, get(b).RPS), kind: throughput}
			if cpu {
				of = func(m measurement) float64 { return m.CPU[roleProxy] }
				x.Value = div(get(a).CPU[roleProxy], get(b).CPU[roleProxy])
			}
			ra, rb := rounds[a+suffix], rounds[b+suffix]
			for i := range min(len(ra), len(rb)) {
				x.ByRound = append(x.ByRound, div(of(ra[i]), of(rb[i])))
			}
			r.Ratios = append(r.Ratios, x)
		}
		proxied := []string{edgePlain, edgeTLS}
		for _, p := range proxies {
			proxied = append(proxied, p+" plain", p+" TLS")
		}
		for _, n := range proxied {
			add(n+" / direct", n, direct, false)
		}
		for _, p := range proxies {
			add("edge / "+p+", plain", edgePlain, p+" plain", false)
			add("edge / "+p+", TLS", edgeTLS, p+" TLS", false)
		}
		for _, p := range proxies {
			add("edge / "+p+" CPU per request, plain", edgePlain, p+" plain", true)
			add("edge / "+p+" CPU per request, TLS", edgeTLS, p+" TLS", true)
		}
		for _, n := range proxied {
			r.Ratios = append(r.Ratios, ratio{Name: n + " p50 added", Body: label, Added: get(n).P50 - d.P50, kind: addedLatency})
		}
		for _, n := range proxied {
			r.Ratios = append(r.Ratios, ratio{Name: n + " p99 added", Body: label, Added: get(n).P99 - d.P99, kind: addedLatency})
		}
	}
	return r
}

// spread formats the range of per-round ratios, empty with fewer than two.
func spread(v []float64) string {
	if len(v) < 2 {
		return ""
	}
	return fmt.Sprintf(" (%.2f to %.2f)", slices.Min(v), slices.Max(v))
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// summarize returns the medians over rounds.
func summarize(ms []measurement) summary {
	s := summary{}
	var rps, cores []float64
	var p50, p99 []time.Duration
	cpu := map[string][]float64{}
	for _, m := range ms {
		rps = append(rps, m.RPS)
		p50 = append(p50, m.P50)
		p99 = append(p99, m.P99)
		cores = append(cores, m.Cores)
		s.Errors += m.Errors
		for role, v := range m.CPU {
			cpu[role] = append(cpu[role], v)
		}
	}
	s.RPS, s.Cores = median(rps), median(cores)
	s.P50, s.P99 = median(p50), median(p99)
	if len(cpu) > 0 {
		s.CPU = map[string]float64{}
		for role, v := range cpu {
			s.CPU[role] = median(v)
		}
	}
	return s
}

func median[T float64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// write renders the report as Markdown tables, ready for docs/perf.md.
func (r *report) write(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "\nEdge benchmark, %s: %s, %d CPUs (%s), %s, GOMAXPROCS %d in every process.\n",
		m.Date, m.OS, m.CPUs, m.CPUModel, m.GoVersion, m.GOMAXPROCS)
	fmt.Fprintf(w, "Load average %s before, %s after. The load generator shares the %d CPUs with the app and the proxy:\n",
		m.LoadBefore, m.LoadAfter, m.CPUs)
	fmt.Fprintf(w, "figures are lower bounds, and the ratios are what to compare.\n")
	metrics := "on"
	if !m.EdgeMetrics {
		metrics = "off"
	}
	fmt.Fprintf(w, "%d keep-alive HTTP/1.1 connections, %s warm-up + %s per scenario, %d rounds in alternating order, medians over rounds; edge metrics %s.\n\n",
		m.Concurrency, m.Warmup, m.Duration, m.Rounds, metrics)

	fmt.Fprintln(w, "| scenario | req/s | req/s by round | p50 | p99 | errors | CPU/req proxy | app | load gen | cores used |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, s := range r.Scenarios {
		var rounds []string
		for _, m := range s.Rounds {
			rounds = append(rounds, thousands(m.RPS))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %d | %s | %s | %s | %.2f |\n", s.Name, thousands(s.Median.RPS), strings.Join(rounds, " / "),
			fmtDur(s.Median.P50), fmtDur(s.Median.P99), s.Median.Errors,
			micros(s.Median.CPU, roleProxy), micros(s.Median.CPU, roleApp), micros(s.Median.CPU, roleLoad), s.Median.Cores)
	}
	for _, s := range r.Scenarios {
		for i, m := range s.Rounds {
			if m.FirstError != "" {
				fmt.Fprintf(w, "\n%s, round %d, first error: %s", s.Name, i+1, m.FirstError)
			}
		}
	}

	fmt.Fprintf(w, "\n| ratio (medians) | %s |\n", strings.Join(r.bodies, " | "))
	fmt.Fprintf(w, "| --- |%s\n", strings.Repeat(" ---: |", len(r.bodies)))
	perBody := len(r.Ratios) / len(r.bodies)
	for i := range perBody {
		cells := []string{r.Ratios[i].Name}
		for b := range r.bodies {
			x := r.Ratios[b*perBody+i]
			if x.kind == throughput {
				cells = append(cells, fmt.Sprintf("%.2f%s", x.Value, spread(x.ByRound)))
			} else {
				cells = append(cells, signedDur(x.Added))
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w, "\nIn brackets: the lowest and highest ratio within one round, where the two ran at most minutes apart.")
	fmt.Fprintln(w, "Throughput ratios above 1.00 mean the first named served more requests per second; CPU ratios")
	fmt.Fprintln(w, "below 1.00 mean the edge spent less CPU per request than the other proxy (a proxy's CPU includes")
	fmt.Fprintln(w, "its worker processes). CPU per request is read from /proc over the measured window and depends")
	fmt.Fprintln(w, "less on other work on the machine than req/s.")
	fmt.Fprintln(w, "The project's goals: edge / Caddy and edge / Traefik ≥ 1.00 on throughput and ≤ 1.00 on CPU per")
	fmt.Fprintln(w, "request; edge / nginx CPU per request ≤ 1.50.")
}

func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// micros formats the CPU per request of role, "—" when not measured.
func micros(cpu map[string]float64, role string) string {
	v, ok := cpu[role]
	if !ok {
		return "—"
	}
	return fmt.Sprintf("%.0f µs", v)
}

func signedDur(d time.Duration) string {
	if d >= 0 {
		return "+" + fmtDur(d)
	}
	return "−" + fmtDur(-d)
}

// thousands formats a rate with thousands separators: 12,345.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
