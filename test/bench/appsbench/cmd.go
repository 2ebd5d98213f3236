package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"bex.co/bex/internal/kubebin"
	"bex.co/bex/test/bench"
)

// Limits of the flags: the bench must fit one machine.
const (
	maxApps         = 100_000
	maxTenants      = 10_000
	maxConcurrency  = 256
	maxListRequests = 100_000
)

type options struct {
	apps, tenants int
	databaseURL   string
	// seeders is how many clients create objects at once.
	seeders int
	// listRequests is how many app lists are timed each time.
	listRequests int
	// concurrency and duration drive each latency scenario; rounds
	// alternate their order.
	concurrency int
	duration    time.Duration
	rounds      int
	// steady is how long requests are counted once everything converged.
	steady time.Duration
	// cpuProfile, when set, is written for the controllers' convergence.
	cpuProfile string
	// kubeVersion is the pinned kube-apiserver's version.
	kubeVersion string
	// finalizer seeds each App with the App controller's finalizer, as
	// the platform's API creates it; without, as kubectl would, and the
	// controller adds it.
	finalizer bool
}

func newCommand() *cobra.Command {
	o := &options{apps: 10_000, tenants: 1_000, seeders: 16, listRequests: 200, concurrency: 4, duration: 5 * time.Second, rounds: 2, steady: 20 * time.Second, kubeVersion: kubebin.DefaultKubeVersion, finalizer: true}
	cmd := &cobra.Command{
		Use:           "appsbench",
		Short:         "Measure the platform with many apps over many tenants",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.apps, "apps", o.apps, "how many apps to seed (one Route and one release each); --apps 1000 is the quick mode")
	f.IntVar(&o.tenants, "tenants", o.tenants, "how many tenants the apps are spread over (round robin)")
	f.StringVar(&o.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "Postgres server to create the bench's database on (default $DATABASE_URL, else a private server)")
	f.IntVar(&o.seeders, "seeders", o.seeders, "how many clients seed at once")
	f.IntVar(&o.listRequests, "list-requests", o.listRequests, "how many app lists of one tenant are timed, with few apps and with all")
	f.IntVar(&o.concurrency, "concurrency", o.concurrency, "connections of the edge latency load")
	f.DurationVar(&o.duration, "duration", o.duration, "measured time of each edge latency scenario per round")
	f.IntVar(&o.rounds, "rounds", o.rounds, "rounds of the edge latency scenarios (alternating order)")
	f.DurationVar(&o.steady, "steady", o.steady, "how long the controllers' requests are counted once all converged")
	f.StringVar(&o.kubeVersion, "kube-version", o.kubeVersion, "version of the pinned kube-apiserver (built when missing)")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the controllers' convergence to this file")
	f.BoolVar(&o.finalizer, "finalizer", o.finalizer, "seed each App with the App controller's finalizer, as the platform's API creates it; --finalizer=false seeds them as kubectl would, and the controller adds it (one write more per App)")
	return cmd
}

func (o *options) validate() error {
	switch {
	case o.tenants < 1 || o.tenants > maxTenants:
		return fmt.Errorf("--tenants %d: want 1 to %d", o.tenants, maxTenants)
	case o.apps < o.tenants || o.apps > maxApps:
		return fmt.Errorf("--apps %d: want --tenants (%d) to %d", o.apps, o.tenants, maxApps)
	case o.seeders < 1 || o.seeders > maxConcurrency:
		return fmt.Errorf("--seeders %d: want 1 to %d", o.seeders, maxConcurrency)
	case o.concurrency < 1 || o.concurrency > maxConcurrency:
		return fmt.Errorf("--concurrency %d: want 1 to %d", o.concurrency, maxConcurrency)
	case o.listRequests < 10 || o.listRequests > maxListRequests:
		return fmt.Errorf("--list-requests %d: want 10 to %d", o.listRequests, maxListRequests)
	case o.duration <= 0 || o.rounds < 1 || o.steady <= 0:
		return errors.New("--duration and --steady must be positive and --rounds at least 1")
	}
	return nil
}

// run seeds, measures and prints the report.
func (o *options) run(ctx context.Context, out io.Writer) error {
	// The controllers' own lines (errors, starts) go to stderr with the
	// progress.
	ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	started := time.Now()
	env, err := startEnv(ctx, o.databaseURL, o.kubeVersion)
	if err != nil {
		return err
	}
	defer env.stop()
	r := &report{apps: o.apps, tenants: o.tenants, finalizer: o.finalizer, loadBefore: bench.LoadAverage()}
	fl := newFleet(o.apps, o.tenants, o.finalizer)

	r.platformReady = time.Since(started)
	if r.planeBefore, err = env.samplePlane(ctx); err != nil {
		return err
	}
	// The first tenant's apps alone: the list's baseline with a small fleet.
	seedStart := time.Now()
	if err := env.seed(ctx, fl, 0, fl.firstTenantApps(), o.seeders); err != nil {
		return err
	}
	r.seeded = time.Since(seedStart)
	if r.listSmall, err = env.timeAppList(ctx, fl, o.listRequests); err != nil {
		return err
	}
	seedStart = time.Now()
	if err := env.seed(ctx, fl, fl.firstTenantApps(), o.apps, o.seeders); err != nil {
		return err
	}
	r.seeded += time.Since(seedStart)
	if r.listLarge, err = env.timeAppList(ctx, fl, o.listRequests); err != nil {
		return err
	}

	stopProfile, err := bench.StartCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	err = env.converge(ctx, fl, o.steady, r)
	stopProfile()
	if err != nil {
		return err
	}
	if err := env.measureEdge(ctx, fl, o, r); err != nil {
		return err
	}
	r.print(out)
	return nil
}
