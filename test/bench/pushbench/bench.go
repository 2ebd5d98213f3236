package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"bex.co/bex/builder/build"
	embedded "bex.co/bex/cmd/bex-embedded/app"
	"bex.co/bex/internal/localfleet"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/wheeltest"
	"bex.co/bex/test/bench"
)

type options struct {
	pushes      int
	stateDir    string
	databaseURL string
	noSandbox   bool
	// pushEarly pushes as soon as the platform is ready, without waiting
	// for the Go standard library's warm-up (the push then waits for it).
	pushEarly bool
	// stack is the app pushed: go (hello world), node or python (one
	// dependency each).
	stack string
	// cpuProfile, when set, is where the process's CPU profile over the
	// warm pushes is written (the platform runs in this process).
	cpuProfile string
	// fleet, after the local runtime's pushes, creates a local cluster
	// with a worker and times the same pushes of a second app placed on
	// it.
	fleet bool
	// sandboxCheck says what this machine lacks to run runc sandboxes
	// (sandbox.Check).
	sandboxCheck func(runc string) error
}

func newCommand() *cobra.Command {
	o := &options{pushes: 5, stack: "go", sandboxCheck: sandbox.Check}
	cmd := &cobra.Command{
		Use:           "pushbench",
		Short:         "Measure push-to-live on the embedded platform",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), cmd.OutOrStdout()) },
	}
	cmd.Flags().IntVar(&o.pushes, "pushes", o.pushes, "how many pushes to time (the first is the tenant's first build)")
	cmd.Flags().StringVar(&o.stateDir, "state-dir", "", "state directory of the platform (default: a temporary one)")
	cmd.Flags().StringVar(&o.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "Postgres to use (default $DATABASE_URL, else a private server)")
	cmd.Flags().BoolVar(&o.noSandbox, "unsafe-no-sandbox", false, "run the platform with --unsafe-no-sandbox: builds and apps as plain processes, the figures without the sandbox")
	cmd.Flags().StringVar(&o.stack, "stack", o.stack, "the app pushed: go (a hello-world server), node (a server with one dependency from the npm registry) or python (a server with one requirement, a wheel the bench makes and pip installs from a local directory)")
	cmd.Flags().StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the platform (this process) over the warm pushes to this file, for go tool pprof")
	cmd.Flags().BoolVar(&o.fleet, "fleet", false, "then create a local cluster (three control-plane machines and a worker, the newest pinned version) and time the same pushes of a second app, which the scheduler places on it: push-to-live onto a workload cluster beside the local runtime's, from one run")
	cmd.Flags().BoolVar(&o.pushEarly, "push-early", false, "make the first push as soon as the platform is ready, before the builder's Go warm-up has finished (the push waits for it)")
	return cmd
}

type sample struct {
	total, appBuild time.Duration
	// steps are the push's Timings line: each step's seconds.
	steps []step
}

type step struct {
	name    string
	seconds float64
}

// validate refuses, before anything starts, what cannot run to its end.
func (o *options) validate() error {
	if o.pushes < 2 {
		return errors.New("--pushes must be at least 2: the first push is cold")
	}
	if o.stack != "go" && o.stack != "node" && o.stack != "python" {
		return fmt.Errorf("--stack %q: want go, node or python", o.stack)
	}
	// Without it the platform would start, Cluster API's managers and the
	// cluster's machines be built and started, and the worker never
	// become healthy.
	if o.fleet {
		if err := o.sandboxCheck(""); err != nil {
			return fmt.Errorf("--fleet: the cluster's worker runs bex-node, whose containers are runc sandboxes with --unsafe-no-sandbox or without: %w", err)
		}
	}
	return nil
}

func (o *options) run(ctx context.Context, out io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.stateDir == "" {
		dir, err := os.MkdirTemp("", "bex-pushbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		// As root the private Postgres runs as the postgres user, who must
		// enter the state directory; MkdirTemp makes it 0700.
		if err := os.Chmod(dir, 0o711); err != nil {
			return err
		}
		o.stateDir = dir
	}
	if o.stack == "python" {
		if err := usePythonWheels(o.stateDir); err != nil {
			return err
		}
	}
	started := time.Now()
	env, stop, err := o.startPlatform(ctx)
	if err != nil {
		return err
	}
	defer stop()
	ready := time.Since(started)
	warm := time.Duration(0)
	if !o.pushEarly && o.stack == "go" {
		if err := waitLog(ctx, filepath.Join(o.stateDir, "platform.log"), "Go standard library cache ready"); err != nil {
			return err
		}
		warm = time.Since(started)
	}

	apps, err := appClient(env)
	if err != nil {
		return err
	}
	if err := createApp(ctx, env["BEX_API"], env["BEX_TOKEN"], "bench"); err != nil {
		return err
	}
	local, err := o.timePushes(ctx, env, apps, "bench", o.cpuProfile)
	if err != nil {
		return err
	}
	var onFleet []sample
	var cluster string
	if o.fleet {
		if cluster, err = o.createCluster(ctx, env); err != nil {
			return err
		}
		if err := createApp(ctx, env["BEX_API"], env["BEX_TOKEN"], "bench-fleet"); err != nil {
			return err
		}
		if err := waitPlaced(ctx, env, "bench-fleet", cluster); err != nil {
			return err
		}
		if onFleet, err = o.timePushes(ctx, env, apps, "bench-fleet", ""); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "platform ready %.1fs after start", ready.Seconds())
	switch {
	case warm > 0:
		fmt.Fprintf(out, "; Go standard library warmed %.1fs after start, before the first push", warm.Seconds())
	case o.stack == "go":
		fmt.Fprintf(out, "; first push made at once (--push-early): it waited for the Go warm-up")
	}
	fmt.Fprintln(out)
	if !o.fleet {
		report(out, local)
		return nil
	}
	fmt.Fprintf(out, "\napp bench on the local runtime (sandboxed processes on this machine):\n")
	report(out, local)
	fmt.Fprintf(out, "\napp bench-fleet on the workload cluster %s (a Pod on its worker, run by bex-node; its first push is the first onto the cluster, with a warm builder cache):\n", cluster)
	report(out, onFleet)
	l, f := warmMedian(local), warmMedian(onFleet)
	fmt.Fprintf(out, "\nwarm push-to-live, workload cluster against local runtime: %.2fs against %.2fs (%.2f×); platform overhead %.2fs against %.2fs (%.2f×)\n",
		f.total.Seconds(), l.total.Seconds(), f.total.Seconds()/l.total.Seconds(),
		f.overhead.Seconds(), l.overhead.Seconds(), f.overhead.Seconds()/l.overhead.Seconds())
	return nil
}

// timePushes pushes the app name o.pushes times, each a new commit of
// o.stack's app answering "<name> <i>", and times each from git push to
// the first 200 of the new body through the edge. With profile set, the
// process's CPU profile over the warm pushes is written there.
func (o *options) timePushes(ctx context.Context, env map[string]string, apps *http.Client, name, profile string) ([]sample, error) {
	repo, err := os.MkdirTemp("", "bex-pushbench-repo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(repo)
	remote, _ := url.Parse(env["BEX_GIT"] + "/dev/" + name + ".git")
	remote.User = url.UserPassword("bex", env["BEX_TOKEN"])
	host := name + "-dev." + strings.Split(env["BEX_DOMAIN"], ":")[0]
	if _, err := git(repo, "init", "-q", "-b", "main"); err != nil {
		return nil, err
	}

	var samples []sample
	for i := 1; i <= o.pushes; i++ {
		if i == 2 && profile != "" {
			stopProfile, err := bench.StartCPUProfile(profile)
			if err != nil {
				return nil, err
			}
			defer stopProfile()
			fmt.Fprintf(os.Stderr, "CPU profile of the warm pushes: %s\n", profile)
		}
		body := fmt.Sprintf("%s %d", name, i)
		if err := writeApp(repo, o.stack, body); err != nil {
			return nil, err
		}
		if _, err := git(repo, "add", "."); err != nil {
			return nil, err
		}
		if _, err := git(repo, "commit", "-q", "-m", body); err != nil {
			return nil, err
		}
		// The clock stops at the first 200 of the new release, which may
		// come before git push returns (the old release drains after it).
		start := time.Now()
		type pushResult struct {
			out string
			err error
		}
		pushed := make(chan pushResult, 1)
		go func() {
			out, err := git(repo, "push", "-q", remote.String(), "main")
			pushed <- pushResult{out, err}
		}()
		if err := waitBody(ctx, apps, host, body); err != nil {
			return nil, err
		}
		total := time.Since(start)
		res := <-pushed
		if res.err != nil {
			return nil, fmt.Errorf("push %d of %s: %w\n%s", i, name, res.err, res.out)
		}
		s := sample{total: total, appBuild: appBuildTime(res.out), steps: timings(res.out)}
		if s.appBuild == 0 {
			return nil, fmt.Errorf("push %d of %s: the build output has no %q line:\n%s", i, name, build.AppBuildPrefix, res.out)
		}
		samples = append(samples, s)
		fmt.Fprintf(os.Stderr, "push %d/%d of %s: %s\n", i, o.pushes, name, s.total.Round(time.Millisecond))
	}
	return samples, nil
}

// medians are the warm pushes' medians, each figure's apart.
type medians struct{ total, appBuild, overhead, untimed time.Duration }

// warmMedian is the medians of every push but the first.
func warmMedian(samples []sample) medians {
	warm := samples[1:]
	med := func(f func(sample) time.Duration) time.Duration {
		v := make([]time.Duration, len(warm))
		for i, s := range warm {
			v[i] = f(s)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return medians{
		total:    med(func(s sample) time.Duration { return s.total }),
		appBuild: med(func(s sample) time.Duration { return s.appBuild }),
		overhead: med(func(s sample) time.Duration { return s.total - s.appBuild }),
		untimed:  med(sample.untimed),
	}
}

// waitLog waits until the platform's log has a line with s.
func waitLog(ctx context.Context, path, s string) error {
	fmt.Fprintf(os.Stderr, "waiting for %q in %s\n", s, path)
	for {
		if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), s) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func report(out io.Writer, samples []sample) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "push\tpush-to-live\tapp build\tplatform overhead\toverhead share\tof it timed\tuntimed\t")
	for i, s := range samples {
		over := s.total - s.appBuild
		note := ""
		if i == 0 {
			note = " (first)"
		}
		fmt.Fprintf(tw, "%d%s\t%.2fs\t%.2fs\t%.2fs\t%.0f%%\t%.2fs\t%.2fs\t\n", i+1, note, s.total.Seconds(), s.appBuild.Seconds(), over.Seconds(),
			100*over.Seconds()/s.total.Seconds(), s.timed().Seconds(), s.untimed().Seconds())
	}
	tw.Flush()
	warm := samples[1:]
	m := warmMedian(samples)
	total, app, over, untimed := m.total, m.appBuild, m.overhead, m.untimed
	fmt.Fprintf(out, "\nwarm pushes (median of %d): push-to-live %.2fs = app build %.2fs + platform overhead %.2fs (overhead/app build = %.2f)\n",
		len(warm), total.Seconds(), app.Seconds(), over.Seconds(), over.Seconds()/app.Seconds())
	fmt.Fprintf(out, "of the overhead, untimed (median): %.2fs: git's own work before the request that sends the pack (git push, the reference advertisement, packing), "+
		"the lines between steps, and this program's %s polling\n", untimed.Seconds(), pollEvery)
	fmt.Fprintf(out, "first push: %.2fs, %.2f× the warm median\n", samples[0].total.Seconds(), samples[0].total.Seconds()/total.Seconds())
	reportSteps(out, warm)
}

// timed is the platform's steps in the push's Timings line, but for the
// app's build and what comes after the new release serves (the old
// one's drain).
func (s sample) timed() time.Duration {
	var sec float64
	for _, st := range s.steps {
		if st.name != "app build" && st.name != "drain" {
			sec += st.seconds
		}
	}
	return time.Duration(sec * float64(time.Second))
}

// untimed is the platform overhead that no step of the Timings line
// covers.
func (s sample) untimed() time.Duration { return s.total - s.appBuild - s.timed() }

// timings reads the push output's "-----> Timings: a 12ms, b 1.38s" line.
func timings(out string) []step {
	var steps []step
	for _, line := range strings.Split(out, "\n") {
		_, list, ok := strings.Cut(line, "-----> Timings: ")
		if !ok {
			continue
		}
		for _, part := range strings.Split(list, ", ") {
			i := strings.LastIndexByte(part, ' ')
			if i < 0 {
				continue
			}
			d, err := time.ParseDuration(strings.TrimSpace(part[i+1:]))
			if err != nil {
				continue
			}
			steps = append(steps, step{name: part[:i], seconds: d.Seconds()})
		}
	}
	return steps
}

// reportSteps prints each step's median over the warm pushes.
func reportSteps(out io.Writer, warm []sample) {
	var names []string
	byName := map[string][]float64{}
	for _, s := range warm {
		for _, st := range s.steps {
			if _, ok := byName[st.name]; !ok {
				names = append(names, st.name)
			}
			byName[st.name] = append(byName[st.name], st.seconds)
		}
	}
	if len(names) == 0 {
		return
	}
	fmt.Fprintf(out, "\nwarm pushes, each step's median (the push output's Timings line):\n")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\tmedian\tmax\t")
	for _, n := range names {
		v := byName[n]
		slices.Sort(v)
		fmt.Fprintf(tw, "%s\t%.3fs\t%.3fs\t\n", n, v[len(v)/2], v[len(v)-1])
	}
	tw.Flush()
}

var appBuildRE = regexp.MustCompile(regexp.QuoteMeta(build.AppBuildPrefix) + ` ([0-9.]+(?:ns|µs|ms|s|m|h)[0-9.a-zµ]*)`)

func appBuildTime(out string) time.Duration {
	m := appBuildRE.FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	d, _ := time.ParseDuration(m[1])
	return d
}

// platformOptions are the embedded platform's options for the run: make
// run's, but for the local fleet, which only --fleet uses. Where Cluster
// API's managers are not built yet (a fresh machine, or a user's first
// run) the fleet would build them in the background, about 20 minutes of
// both cores, while the pushes are timed.
func (o *options) platformOptions() *embedded.Options {
	opts := embedded.NewOptions()
	opts.StateDir = o.stateDir
	opts.DatabaseURL = o.databaseURL
	opts.UnsafeNoSandbox = o.noSandbox
	opts.NoLocalFleet = !o.fleet
	return opts
}

func (o *options) startPlatform(ctx context.Context) (map[string]string, func(), error) {
	opts := o.platformOptions()
	if o.fleet {
		var err error
		if opts.NodeBinary, err = buildNode(ctx, filepath.Join(o.stateDir, "bin")); err != nil {
			return nil, nil, err
		}
	}
	if err := opts.Complete(); err != nil {
		return nil, nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	logFile, err := os.Create(filepath.Join(o.stateDir, "platform.log"))
	if err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- opts.Run(runCtx, logFile) }()
	stop := func() {
		cancel()
		<-done
		logFile.Close()
		// The containers of the fleet's worker outlive its node agent, as
		// a kubelet's do: the bench's end is its machine's.
		if opts.NodeBinary != "" {
			localfleet.ResetNodes(filepath.Join(o.stateDir, "fleet"), opts.NodeBinary, os.Stderr)
		}
	}
	fmt.Fprintf(os.Stderr, "starting the platform in %s (log: %s)\n", o.stateDir, logFile.Name())
	for {
		if data, err := os.ReadFile(filepath.Join(o.stateDir, "env")); err == nil {
			return parseEnv(string(data)), stop, nil
		}
		select {
		case err := <-done:
			cancel()
			return nil, nil, fmt.Errorf("the platform stopped before it was ready: %v (see %s)", err, logFile.Name())
		case <-ctx.Done():
			stop()
			return nil, nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func parseEnv(s string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if kv, ok := strings.CutPrefix(line, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = strings.Trim(v, "'")
		}
	}
	return env
}

func createApp(ctx context.Context, api, token, name string) error {
	body, _ := json.Marshal(map[string]string{"name": name})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/api/v1/apps", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("creating app %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("creating app %s: %s %s", name, resp.Status, b)
	}
	return nil
}

// appClient reaches apps at the edge's HTTPS port (BEX_HTTPS) whatever
// their hostname, trusting the local CA (BEX_CA), as curl --cacert does.
func appClient(env map[string]string) (*http.Client, error) {
	pem, err := os.ReadFile(env["BEX_CA"])
	if err != nil {
		return nil, fmt.Errorf("reading BEX_CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("BEX_CA %s holds no certificate", env["BEX_CA"])
	}
	u, err := url.Parse(env["BEX_HTTPS"])
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("BEX_HTTPS %q is not a URL", env["BEX_HTTPS"])
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, u.Host)
		},
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}}, nil
}

// pollEvery is how often waitBody asks the app for its new body.
const pollEvery = 20 * time.Millisecond

func waitBody(ctx context.Context, c *http.Client, host, want string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/", nil)
		if resp, err := c.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(b) == want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
	return fmt.Errorf("%s never answered %q", host, want)
}

// The Python app's one requirement: a pure-Python package the bench makes
// as a wheel, since this machine reaches no package index. pip installs it
// from a local directory, which the build sandbox binds read-only, as an
// operator's wheel mirror would be.
var requirement = wheeltest.Wheel{Project: "bexbench-greeting", Module: "bexbench_greeting", Version: "1.0",
	Source: "def greet(body):\n    return body\n"}

// usePythonWheels makes the Python app's requirement in a wheel
// directory under stateDir and points pip there, index off: the platform
// runs in this process and passes pip's configuration to its builds.
func usePythonWheels(stateDir string) error {
	dir := filepath.Join(stateDir, "wheels")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if _, err := requirement.Write(dir); err != nil {
		return fmt.Errorf("making the Python requirement's wheel: %w", err)
	}
	// Readable by the sandboxed build's user.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	for k, v := range map[string]string{"PIP_FIND_LINKS": dir, "PIP_NO_INDEX": "1"} {
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	return nil
}

// writeApp writes the app of stack that answers body.
func writeApp(dir, stack, body string) error {
	if stack == "python" {
		src := fmt.Sprintf(`import os
from http.server import BaseHTTPRequestHandler, HTTPServer
from %s import greet

class Bench(BaseHTTPRequestHandler):
    def do_GET(self):
        body = greet(%q).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

HTTPServer(("", int(os.environ["PORT"])), Bench).serve_forever()
`, requirement.Module, body)
		if err := os.WriteFile(filepath.Join(dir, "requirements.txt"), []byte(requirement.Project+"=="+requirement.Version+"\n"), 0o644); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "app.py"), []byte(src), 0o644)
	}
	if stack == "node" {
		pkg := `{"name":"bench","version":"1.0.0","main":"server.js","dependencies":{"is-number":"7.0.0"}}`
		src := fmt.Sprintf(`const isNumber = require('is-number');
require('http').createServer((q, r) => r.end(isNumber(1) ? %q : 'no')).listen(process.env.PORT);
`, body)
		if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(pkg), 0o644); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "server.js"), []byte(src), 0o644)
	}
	src := fmt.Sprintf(`package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, %q) })
	http.ListenAndServe(":"+os.Getenv("PORT"), nil)
}
`, body)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/bench\n\ngo 1.22\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644)
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com", "GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
