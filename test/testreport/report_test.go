package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// suite is go test -json of four packages: one without tests, one that
// passes, one with a failing test beside a passing one, one whose binary
// died in a test (a timeout), and a build failure.
const suite = `{"Action":"output","Package":"ex/none","Output":"?   \tex/none\t[no test files]\n"}
{"Action":"skip","Package":"ex/none","Elapsed":0}
{"Action":"build-output","ImportPath":"ex/broken [ex/broken.test]","Output":"# ex/broken\n"}
{"Action":"build-output","ImportPath":"ex/broken [ex/broken.test]","Output":"broken.go:3:1: syntax error\n"}
{"Action":"build-fail","ImportPath":"ex/broken [ex/broken.test]"}
{"Action":"start","Package":"ex/broken"}
{"Action":"output","Package":"ex/broken","Output":"FAIL\tex/broken [build failed]\n"}
{"Action":"fail","Package":"ex/broken","Elapsed":0,"FailedBuild":"ex/broken [ex/broken.test]"}
{"Action":"start","Package":"ex/fast"}
{"Action":"run","Package":"ex/fast","Test":"TestQuick"}
{"Action":"output","Package":"ex/fast","Test":"TestQuick","Output":"quick says hello\n"}
{"Action":"pass","Package":"ex/fast","Test":"TestQuick","Elapsed":0.5}
{"Action":"pass","Package":"ex/fast","Test":"TestSlowish","Elapsed":3}
{"Action":"output","Package":"ex/fast","Output":"ok  \tex/fast\t3.6s\n"}
{"Action":"pass","Package":"ex/fast","Elapsed":3.6}
not an event: go test's own words
{"Action":"output","Package":"ex/slow","Test":"TestFine","Output":"fine's log, not printed\n"}
{"Action":"pass","Package":"ex/slow","Test":"TestFine","Elapsed":40}
{"Action":"output","Package":"ex/slow","Test":"TestBad","Output":"--- FAIL: TestBad (100.00s)\n"}
{"Action":"output","Package":"ex/slow","Test":"TestBad","Output":"    bad_test.go:9: want 1, got 2\n"}
{"Action":"fail","Package":"ex/slow","Test":"TestBad","Elapsed":100}
{"Action":"pass","Package":"ex/slow","Test":"TestBad/sub","Elapsed":99}
{"Action":"skip","Package":"ex/slow","Test":"TestSkipped","Elapsed":0}
{"Action":"output","Package":"ex/slow","Output":"FAIL\n"}
{"Action":"output","Package":"ex/slow","Output":"FAIL\tex/slow\t141.2s\n"}
{"Action":"fail","Package":"ex/slow","Elapsed":141.2}
{"Action":"output","Package":"ex/hung","Test":"TestHangs","Output":"panic: test timed out after 1m0s\n"}
{"Action":"fail","Package":"ex/hung","Elapsed":60}
{"Action":"output","Package":"ex/cut","Test":"TestCut","Output":"the last words of a binary killed mid-test\n"}
`

func TestReport(t *testing.T) {
	var out strings.Builder
	clock := time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(150 * time.Second); return clock }
	reads := 0
	cpu := func() (cpuTimes, error) {
		reads++
		if reads == 1 {
			return cpuTimes{busy: 1000, total: 4000, cores: 2}, nil
		}
		return cpuTimes{busy: 1000 + 3000, total: 4000 + 4000, cores: 2}, nil
	}
	r := newReport(&out, 2, now, cpu)
	r.progress()
	if err := r.read(strings.NewReader(suite)); err != nil {
		t.Fatal(err)
	}
	r.progress()
	times := filepath.Join(t.TempDir(), "out", "test-times.txt")
	if err := r.finish(times); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	t.Logf("report:\n%s", got)
	for _, want := range []string{
		"broken.go:3:1: syntax error\nFAIL\tex/broken [build failed]\n",
		"ok  \tex/fast\t3.6s\n",
		"not an event: go test's own words\n",
		"--- FAIL: TestBad (100.00s)\n    bad_test.go:9: want 1, got 2\n",
		"FAIL\nFAIL\tex/slow\t141.2s\n",
		"panic: test timed out after 1m0s\n",
		"FAIL\tex/hung\t60.0s\n",
		"the last words of a binary killed mid-test\nFAIL\tex/cut\t(ended without a result)\n",
		"4 packages tested (4 failed), 1 without tests; wall time 7m30s, package time 3m25s in all\n",
		"cores busy: 75% of 2 cores (1.50 cores on average)\n",
		"-- 2m30s: 0 packages reported; cores busy: 75% of 2 cores (1.50 cores on average)\n",
		"-- 5m0s: 5 packages reported; cores busy: 75% of 2 cores (1.50 cores on average)\n",
		"slowest packages:\n     141.2s  ex/slow\n      60.0s  ex/hung\nslowest tests:\n     100.0s  ex/slow TestBad\n      40.0s  ex/slow TestFine\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, line := range []string{"FAIL\tex/slow\t", "FAIL\tex/broken"} {
		if n := strings.Count(got, line); n != 1 {
			t.Errorf("%q is printed %d times, want once", line, n)
		}
	}
	for _, hidden := range []string{"quick says hello", "fine's log", "no test files", "TestBad/sub", "TestSkipped"} {
		if strings.Contains(got, hidden) {
			t.Errorf("the report shows %q, which go test without -json hides", hidden)
		}
	}
	b, err := os.ReadFile(times)
	if err != nil {
		t.Fatal(err)
	}
	wantFile := "# wall time 7m30s; seconds, package, test, outcome; slowest first\n" +
		"141.2\tex/slow\t-\tFAIL\n60.0\tex/hung\t-\tFAIL\n3.6\tex/fast\t-\tok\n0.0\tex/broken\t-\tFAIL\n" +
		"100.0\tex/slow\tTestBad\tFAIL\n40.0\tex/slow\tTestFine\tok\n3.0\tex/fast\tTestSlowish\tok\n0.5\tex/fast\tTestQuick\tok\n"
	if string(b) != wantFile {
		t.Errorf("times file:\n%s\nwant:\n%s", b, wantFile)
	}
}

func TestParseCPU(t *testing.T) {
	c, err := parseCPU("cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 50 2 25 400 20 1 1 0 0 0\n", 2)
	if err != nil {
		t.Fatal(err)
	}
	if c.busy != 160 || c.total != 1000 || c.cores != 2 {
		t.Errorf("got busy %d total %d cores %d, want 160, 1000, 2", c.busy, c.total, c.cores)
	}
	if _, err := parseCPU("intr 1 2 3\n", 2); err == nil {
		t.Error("a /proc/stat without its cpu line was read")
	}
	if got := (cpuTimes{}).busyUntil(cpuTimes{}); got != "not measured" {
		t.Errorf("no ticks between two reads: %q", got)
	}
}

// TestRecap: a failed test's long output (a platform's log dumped at its
// end) gets the lines the test wrote again just before its "--- FAIL"
// line; a short one is left as it is.
func TestRecap(t *testing.T) {
	var b strings.Builder
	b.WriteString("=== RUN   TestLong\n")
	b.WriteString("    long_test.go:12: a cluster ready in 1m2s\n")
	b.WriteString("    long_test.go:40: 3 of 500 requests failed\n")
	for i := range 100 {
		fmt.Fprintf(&b, "        I1206 16:20:35 controller.go:%d] \"Shutdown signal received\"\n", i)
	}
	b.WriteString("--- FAIL: TestLong (494.68s)\n")
	got := withRecap(b.String())
	fail := strings.Index(got, "--- FAIL: TestLong")
	recap := strings.LastIndex(got, "    long_test.go:40: 3 of 500 requests failed\n")
	if recap < 0 || fail < 0 || recap > fail || strings.Count(got, "long_test.go:40:") != 2 || fail-recap > 200 {
		t.Errorf("the recap of a long output:\n%s", got)
	}
	if !strings.HasPrefix(got, b.String()[:strings.Index(b.String(), "--- FAIL")]) {
		t.Error("the output before the recap changed")
	}
	short := "=== RUN   TestShort\n    short_test.go:9: want 1, got 2\n--- FAIL: TestShort (0.10s)\n"
	if got := withRecap(short); got != short {
		t.Errorf("a short output changed:\n%s", got)
	}
}
