package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, and the
// build events go test adds).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string
}

// timing is how long a package or a test took.
type timing struct {
	Package string
	Test    string
	Elapsed time.Duration
	Failed  bool
}

// pkgState is what is kept of a package until it ends: the output of each
// test ("" for the package's own), in the order it came, to print if the
// package fails.
type pkgState struct {
	order  []string
	output map[string]*strings.Builder
	// ended is each ended test's action: pass, fail or skip.
	ended map[string]string
}

// report turns the events into lines as they come and a summary at the
// end. Its methods may be called from several goroutines.
type report struct {
	mu      sync.Mutex
	out     io.Writer
	top     int
	now     func() time.Time
	cpu     func() (cpuTimes, error)
	start   time.Time
	cpuFrom cpuTimes
	cpuErr  error

	pkgs      map[string]*pkgState
	packages  []timing
	tests     []timing
	noTests   int
	failedPkg int
	builds    map[string]*strings.Builder
}

func newReport(out io.Writer, top int, now func() time.Time, cpu func() (cpuTimes, error)) *report {
	r := &report{out: out, top: top, now: now, cpu: cpu, start: now(),
		pkgs: map[string]*pkgState{}, builds: map[string]*strings.Builder{}}
	r.cpuFrom, r.cpuErr = cpu()
	return r
}

// read consumes the events until in ends. A line that is not an event
// (go test's own messages when it cannot start) is printed as it is.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		r.mu.Lock()
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(r.out, "%s\n", line)
		} else {
			r.add(e)
		}
		r.mu.Unlock()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading go test's events: %w", err)
	}
	return nil
}

func (r *report) add(e event) {
	switch e.Action {
	case "build-output":
		b := r.builds[e.ImportPath]
		if b == nil {
			b = &strings.Builder{}
			r.builds[e.ImportPath] = b
		}
		b.WriteString(e.Output)
		return
	case "build-fail":
		if b := r.builds[e.ImportPath]; b != nil {
			fmt.Fprint(r.out, b.String())
		}
		delete(r.builds, e.ImportPath)
		return
	}
	if e.Package == "" {
		return
	}
	p := r.pkgs[e.Package]
	if p == nil {
		p = &pkgState{output: map[string]*strings.Builder{}, ended: map[string]string{}}
		r.pkgs[e.Package] = p
	}
	switch e.Action {
	case "output":
		b := p.output[e.Test]
		if b == nil {
			b = &strings.Builder{}
			p.output[e.Test] = b
			p.order = append(p.order, e.Test)
		}
		b.WriteString(e.Output)
	case "pass", "fail", "skip":
		if e.Test != "" {
			p.ended[e.Test] = e.Action
			if !strings.Contains(e.Test, "/") && e.Action != "skip" {
				r.tests = append(r.tests, timing{Package: e.Package, Test: e.Test, Elapsed: seconds(e.Elapsed), Failed: e.Action == "fail"})
			}
			return
		}
		r.endPackage(e, p)
	}
}

// endPackage prints the package's line, and the output of what failed in
// it, as go test does without -json.
func (r *report) endPackage(e event, p *pkgState) {
	delete(r.pkgs, e.Package)
	out := p.output[""]
	switch {
	case e.Action == "skip" || e.Action == "pass" && out != nil && strings.Contains(out.String(), "[no test files]"):
		r.noTests++
		return
	case e.Action == "pass":
		r.packages = append(r.packages, timing{Package: e.Package, Elapsed: seconds(e.Elapsed)})
		fmt.Fprintf(r.out, "ok  \t%s\t%.1fs\n", e.Package, e.Elapsed)
		return
	}
	r.failedPkg++
	r.packages = append(r.packages, timing{Package: e.Package, Elapsed: seconds(e.Elapsed), Failed: true})
	// The tests that failed, and those that never ended: a panic or a
	// timeout stops the binary in the middle of one.
	for _, test := range p.order {
		if test == "" || p.ended[test] == "pass" || p.ended[test] == "skip" {
			continue
		}
		fmt.Fprint(r.out, withRecap(p.output[test].String()))
	}
	// go test's own line ("FAIL\tpkg\t1.2s", "FAIL\tpkg [build failed]")
	// is the package's last output; a binary that could not run may lack
	// it.
	var own string
	if out != nil {
		own = out.String()
		fmt.Fprint(r.out, own)
	}
	if !strings.Contains(own, "FAIL\t"+e.Package+"\t") && !strings.Contains(own, "FAIL\t"+e.Package+" [") {
		fmt.Fprintf(r.out, "FAIL\t%s\t%.1fs\n", e.Package, e.Elapsed)
	}
}

// finish prints what never ended (a package whose binary was killed
// mid-test leaves no end event), then the summary, and writes every time
// to the file times names, if any.
func (r *report) finish(times string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(r.pkgs)) {
		p := r.pkgs[name]
		for _, test := range p.order {
			fmt.Fprint(r.out, p.output[test].String())
		}
		fmt.Fprintf(r.out, "FAIL\t%s\t(ended without a result)\n", name)
		r.failedPkg++
	}
	wall := r.now().Sub(r.start)
	byTime := func(a, b timing) int { return cmp.Compare(b.Elapsed, a.Elapsed) }
	slices.SortStableFunc(r.packages, byTime)
	slices.SortStableFunc(r.tests, byTime)

	var sum time.Duration
	for _, p := range r.packages {
		sum += p.Elapsed
	}
	fmt.Fprintf(r.out, "\n%d packages tested (%d failed), %d without tests; wall time %s, package time %s in all\n",
		len(r.packages), r.failedPkg, r.noTests, wall.Round(time.Second), sum.Round(time.Second))
	if r.cpuErr == nil {
		if to, err := r.cpu(); err == nil {
			fmt.Fprintf(r.out, "cores busy: %s\n", r.cpuFrom.busyUntil(to))
		}
	}
	fmt.Fprintf(r.out, "slowest packages:\n")
	for _, p := range r.packages[:min(r.top, len(r.packages))] {
		fmt.Fprintf(r.out, "  %8.1fs  %s\n", p.Elapsed.Seconds(), p.Package)
	}
	fmt.Fprintf(r.out, "slowest tests:\n")
	for _, tm := range r.tests[:min(r.top, len(r.tests))] {
		fmt.Fprintf(r.out, "  %8.1fs  %s %s\n", tm.Elapsed.Seconds(), tm.Package, tm.Test)
	}
	if times == "" {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# wall time %s; seconds, package, test, outcome; slowest first\n", wall.Round(time.Second))
	for _, list := range [][]timing{r.packages, r.tests} {
		for _, tm := range list {
			outcome := "ok"
			if tm.Failed {
				outcome = "FAIL"
			}
			fmt.Fprintf(&b, "%.1f\t%s\t%s\t%s\n", tm.Elapsed.Seconds(), tm.Package, cmp.Or(tm.Test, "-"), outcome)
		}
	}
	if err := os.MkdirAll(filepath.Dir(times), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(times, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "every package's and test's time: %s\n", times)
	return nil
}

// progress prints how long the run has taken, how many packages were
// reported and how busy the cores were so far: the slowest packages start
// first and may hold every place go test gives packages (-p) for many
// minutes, in which no line comes.
func (r *report) progress() {
	r.mu.Lock()
	defer r.mu.Unlock()
	busy := "not measured"
	if r.cpuErr == nil {
		if to, err := r.cpu(); err == nil {
			busy = r.cpuFrom.busyUntil(to)
		}
	}
	fmt.Fprintf(r.out, "-- %s: %d packages reported; cores busy: %s\n",
		r.now().Sub(r.start).Round(time.Second), len(r.packages)+r.noTests, busy)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Bounds of withRecap: an output of more than recapAfter lines gets a
// recap of its last recapLines lines of the tests' own.
const (
	recapAfter = 60
	recapLines = 30
)

// ownLine is a line a test wrote (t.Log, t.Error, t.Fatal): its file and
// line first.
var ownLine = regexp.MustCompile(`^\s+[\w.-]+_test\.go:\d+: `)

// withRecap is a failed test's output with, when it is long (a platform's
// log dumped at its end), the lines the tests wrote again just before its
// "--- FAIL" line, so that what failed is found next to where it is
// reported, not a thousand lines above.
func withRecap(out string) string {
	lines := strings.SplitAfter(out, "\n")
	if len(lines) <= recapAfter {
		return out
	}
	end := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "--- FAIL: ") {
			end = i
			break
		}
	}
	if end < 0 {
		return out
	}
	var own []string
	for _, l := range lines[:end] {
		if ownLine.MatchString(l) {
			own = append(own, l)
		}
	}
	if len(own) == 0 {
		return out
	}
	if len(own) > recapLines {
		own = own[len(own)-recapLines:]
	}
	var b strings.Builder
	for _, l := range lines[:end] {
		b.WriteString(l)
	}
	fmt.Fprintf(&b, "    (the test's own last %d lines again, from the %d lines above:)\n", len(own), end)
	for _, l := range own {
		b.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			b.WriteString("\n")
		}
	}
	for _, l := range lines[end:] {
		b.WriteString(l)
	}
	return b.String()
}
