package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Hostnames the proxies serve. The edge routes tlsHost as the default
// hostname of app "hello" of tenant "bench", and plainHost through a Route
// that asked for plain HTTP; the other proxies answer any name.
const (
	benchDomain = "edgebench.test"
	benchTenant = "bench"
	benchApp    = "hello"
	tlsHost     = benchApp + "-" + benchTenant + "." + benchDomain
	plainHost   = "plain." + benchDomain
)

type options struct {
	concurrency int
	duration    time.Duration
	warmup      time.Duration
	rounds      int
	large       bool
	gomaxprocs  int
	edgeMetrics bool
	jsonOut     string
	// proxies are the keys of the proxies measured beside the edge.
	proxies     []string
	caddy       string
	edgeProfile string
	// caddyProfile is the prefix of Caddy's CPU profiles, one per Caddy
	// scenario and round.
	caddyProfile string
	// sandbox runs the app in a runc container of the platform's sandbox,
	// as make run runs tenant apps: every scenario then reaches it over
	// the sandbox bridge.
	sandbox bool
}

func newCommand() *cobra.Command {
	o := &options{
		concurrency: 32, duration: 10 * time.Second, warmup: 2 * time.Second, rounds: 2,
		gomaxprocs: runtime.NumCPU(), edgeMetrics: true, proxies: proxyKeys(),
	}
	cmd := &cobra.Command{
		Use:           "edgebench",
		Short:         "Measure the edge against the app directly and against Caddy, nginx, HAProxy and Traefik",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.concurrency, "concurrency", o.concurrency, "concurrent keep-alive connections of the load generator")
	f.DurationVar(&o.duration, "duration", o.duration, "measured time per scenario and round")
	f.DurationVar(&o.warmup, "warmup", o.warmup, "unmeasured load before each measurement, on the same connections")
	f.IntVar(&o.rounds, "rounds", o.rounds, "rounds over all scenarios, alternating their order; the report gives medians")
	f.BoolVar(&o.large, "large", o.large, "also measure a 16 KiB response body")
	f.IntVar(&o.gomaxprocs, "gomaxprocs", o.gomaxprocs, "GOMAXPROCS of every process (load generator, app, edge, Caddy, Traefik), nginx's workers and HAProxy's threads")
	f.BoolVar(&o.edgeMetrics, "edge-metrics", o.edgeMetrics, "the edge records its Prometheus metrics, as deployed")
	f.StringVar(&o.jsonOut, "json", "", "also write the results as JSON to this file")
	f.BoolVar(&o.sandbox, "sandbox", false, "run the app in a tenant sandbox (runc, its own network namespace behind the sandbox bridge), as make run does; needs root")
	f.StringSliceVar(&o.proxies, "proxies", o.proxies, "proxies to measure beside the edge (caddy, nginx, haproxy, traefik)")
	f.StringVar(&o.caddy, "caddy", "", "Caddy binary to use (default: the pinned build, built when missing)")
	f.StringVar(&o.edgeProfile, "edge-cpuprofile", "", "write a CPU profile of the edge process to this file")
	f.StringVar(&o.caddyProfile, "caddy-cpuprofile", "", "write CPU profiles of Caddy's measured windows to PREFIX-<scenario>-<round>.pprof")
	_ = f.MarkHidden("edge-cpuprofile")
	_ = f.MarkHidden("caddy-cpuprofile")
	cmd.AddCommand(newAppCommand(), newEdgeCommand())
	return cmd
}

func (o *options) validate() error {
	switch {
	case o.concurrency < 1:
		return errors.New("--concurrency must be at least 1")
	case o.duration < 100*time.Millisecond:
		return errors.New("--duration must be at least 100ms")
	case o.warmup < 0:
		return errors.New("--warmup must not be negative")
	case o.rounds < 1:
		return errors.New("--rounds must be at least 1")
	case o.gomaxprocs < 1:
		return errors.New("--gomaxprocs must be at least 1")
	}
	return nil
}

func (o *options) run(ctx context.Context, out, progress io.Writer) error {
	runtime.GOMAXPROCS(o.gomaxprocs)
	dir, err := os.MkdirTemp("", "bex-edgebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	env, err := startEnvironment(ctx, o, dir, progress)
	if err != nil {
		return err
	}
	defer env.stop()

	bodies := []body{{path: "/", size: len(smallBody)}}
	if o.large {
		bodies = append(bodies, body{path: "/16k", size: largeBodySize})
	}
	scenarios := env.scenarios(bodies)
	machine := describeMachine(o)
	fmt.Fprintf(progress, "Measuring %d scenarios × %d rounds, %s warm-up + %s each, %d connections (about %s)\n",
		len(scenarios), o.rounds, o.warmup, o.duration, o.concurrency,
		(time.Duration(len(scenarios)*o.rounds) * (o.warmup + o.duration + time.Second)).Round(time.Second))

	res := make([][]measurement, len(scenarios))
	step, steps := 0, len(scenarios)*o.rounds
	for round := range o.rounds {
		for k := range scenarios {
			i := k
			if round%2 == 1 {
				i = len(scenarios) - 1 - k
			}
			step++
			sc := scenarios[i]
			fmt.Fprintf(progress, "[%*d/%d] round %d/%d  %-16s ", len(strconv.Itoa(steps)), step, steps, round+1, o.rounds, sc.name)
			profiled := o.profileCaddy(ctx, env, sc, round)
			m, err := measure(ctx, sc.target, o.concurrency, o.warmup, o.duration, env.pids(sc))
			if perr := profiled(); err == nil {
				err = perr
			}
			if err != nil {
				fmt.Fprintln(progress)
				return fmt.Errorf("measuring %s: %w", sc.name, err)
			}
			fmt.Fprintf(progress, "%7.0f req/s  p50 %-9s p99 %-9s errors %d  CPU/req: proxy %s app %s load %s (%.2f cores)\n",
				m.RPS, fmtDur(m.P50), fmtDur(m.P99), m.Errors, micros(m.CPU, roleProxy), micros(m.CPU, roleApp), micros(m.CPU, roleLoad), m.Cores)
			res[i] = append(res[i], m)
		}
	}
	machine.LoadAfter = loadAverage()

	rep := newReport(o, machine, env.proxyNames(), scenarios, res)
	rep.write(out)
	if o.jsonOut != "" {
		if err := rep.writeJSON(o.jsonOut); err != nil {
			return err
		}
		fmt.Fprintf(progress, "Wrote %s\n", o.jsonOut)
	}
	return nil
}

// profileCaddy fetches a CPU profile of Caddy over the measured window of
// sc, when asked to and sc is a Caddy scenario. The returned func waits for
// it.
func (o *options) profileCaddy(ctx context.Context, env *environment, sc scenario, round int) func() error {
	if o.caddyProfile == "" || sc.proxy != proxyCaddy {
		return func() error { return nil }
	}
	file := fmt.Sprintf("%s-%s-%d.pprof", o.caddyProfile, strings.ReplaceAll(sc.name, " ", "-"), round+1)
	done := make(chan error, 1)
	go func() {
		select {
		case <-ctx.Done():
			done <- ctx.Err()
			return
		case <-time.After(o.warmup):
		}
		done <- caddyProfile(ctx, env.caddyAdmin, max(1, int(o.duration.Seconds())), file)
	}()
	return func() error { return <-done }
}
