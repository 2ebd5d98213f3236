package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime/pprof"

	"github.com/caddyserver/certmagic"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"bex.co/bex/internal/edge"
)

type edgeOptions struct {
	caDir, storageDir, upstream, cpuProfile string
	metrics                                 bool
}

// newEdgeCommand is the hidden "edge" subcommand: an edge.Server on the
// listeners it inherits as file descriptors 3 (HTTP) and 4 (HTTPS).
func newEdgeCommand() *cobra.Command {
	o := &edgeOptions{}
	cmd := &cobra.Command{
		Use:    "edge",
		Short:  "Serve the benchmark's edge on inherited file descriptors 3 (HTTP) and 4 (HTTPS)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.caDir, "ca-dir", "", "directory of the local CA")
	f.StringVar(&o.storageDir, "storage-dir", "", "certmagic file storage")
	f.StringVar(&o.upstream, "upstream", "", "host:port of the app")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile to this file")
	f.BoolVar(&o.metrics, "metrics", true, "record the edge's Prometheus metrics")
	return cmd
}

// fixedApps runs one app with one upstream.
type fixedApps struct{ upstream []string }

func (a fixedApps) Upstreams(tenant, app string) []string {
	if a.Runs(tenant, app) {
		return a.upstream
	}
	return nil
}

func (a fixedApps) Runs(tenant, app string) bool { return tenant == benchTenant && app == benchApp }

func (o *edgeOptions) run(ctx context.Context) error {
	if o.caDir == "" || o.storageDir == "" || o.upstream == "" {
		return fmt.Errorf("edge: --ca-dir, --storage-dir and --upstream are required")
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	httpL, err := inheritedListener(3, "http")
	if err != nil {
		return err
	}
	httpsL, err := inheritedListener(4, "https")
	if err != nil {
		return err
	}
	ca, err := edge.LoadOrCreateLocalCA(o.caDir)
	if err != nil {
		return err
	}
	table := &edge.Table{Defaults: &edge.DefaultHosts{Domain: benchDomain, Apps: fixedApps{[]string{o.upstream}}}}
	table.SetRoutes([]edge.RouteEntry{{Hostname: plainHost, Tenant: benchTenant, App: benchApp, PlainHTTP: true}})
	sopts := edge.ServerOptions{
		Table: table, Storage: &certmagic.FileStorage{Path: o.storageDir}, LocalCA: ca,
		HTTPPort: httpL.Addr().(*net.TCPAddr).Port, HTTPSPort: httpsL.Addr().(*net.TCPAddr).Port, ListenHost: "127.0.0.1",
		Log: funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}),
	}
	if o.metrics {
		sopts.Metrics = prometheus.NewRegistry()
	}
	srv, err := edge.NewServer(sopts)
	if err != nil {
		return err
	}
	defer srv.Close()
	return srv.Serve(ctx, httpL, httpsL)
}
