package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/controllers"
	"bex.co/bex/deploy"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/dnstest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/pgserver"
	"bex.co/bex/internal/store"
)

// env is what the bench runs on: a real control plane with the platform's
// CRDs, a real Postgres database with the store's schema, and a real DNS
// server holding the Routes' records.
type env struct {
	cp    *controlplane.ControlPlane
	cfg   *rest.Config
	kube  client.Client
	store *store.Store
	dns   *dnstest.Server
	// api is the URL of the platform API, once served.
	api   string
	stops []func()
}

// startEnv starts the control plane (kube-apiserver kubeVersion), the database (a new one on the server
// of databaseURL, else a private server) and the DNS server.
func startEnv(ctx context.Context, databaseURL, kubeVersion string) (_ *env, err error) {
	e := &env{}
	defer func() {
		if err != nil {
			e.stop()
		}
	}()
	fmt.Fprintln(os.Stderr, "starting etcd and kube-apiserver")
	cp, err := controlplane.Start(ctx, controlplane.Options{Log: os.Stderr, APIServers: []controlplane.APIServerSpec{{Version: kubeVersion}}})
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	e.cp = cp
	e.stops = append(e.stops, cp.Stop)
	e.cfg = rest.CopyConfig(cp.RESTConfig())
	if _, err := kubeapply.InstallCRDs(ctx, e.cfg, deploy.CRDs()); err != nil {
		return nil, fmt.Errorf("installing CRDs: %w", err)
	}
	// The seeding client is not the platform's: it may go as fast as the
	// apiserver lets it.
	seedCfg := rest.CopyConfig(e.cfg)
	seedCfg.QPS, seedCfg.Burst = -1, 0
	if e.kube, err = client.New(seedCfg, client.Options{Scheme: controllers.NewScheme()}); err != nil {
		return nil, err
	}

	dbURL, dropDB, err := e.database(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	e.stops = append(e.stops, dropDB)
	if e.store, err = store.Open(ctx, dbURL); err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	e.stops = append(e.stops, e.store.Close)
	if e.dns, err = dnstest.Listen(); err != nil {
		return nil, err
	}
	e.stops = append(e.stops, e.dns.Close)
	return e, nil
}

// stop stops what startEnv started, the last first.
func (e *env) stop() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
}

// database creates the bench's database on the server of serverURL, or on
// a private server when it is empty, and returns its URL and what drops it.
func (e *env) database(ctx context.Context, serverURL string) (string, func(), error) {
	if serverURL == "" {
		dir, err := os.MkdirTemp("", "bex-appsbench-pg-")
		if err != nil {
			return "", nil, err
		}
		// As root the server runs as the postgres user, who must enter
		// the directory; MkdirTemp makes it 0700.
		if err := os.Chmod(dir, 0o755); err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
		fmt.Fprintln(os.Stderr, "starting a private Postgres")
		srv, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dir, "data"), Ephemeral: true})
		if err != nil {
			os.RemoveAll(dir)
			return "", nil, fmt.Errorf("starting Postgres: %w", err)
		}
		serverURL = srv.URL("postgres")
		e.stops = append(e.stops, func() { _ = srv.Stop(); os.RemoveAll(dir) })
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	name := "bex_appsbench_" + strconv.Itoa(os.Getpid())
	if err := execSQL(ctx, serverURL, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("creating database %s: %w", name, err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := execSQL(ctx, serverURL, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "dropping database %s: %v\n", name, err)
		}
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

func execSQL(ctx context.Context, dbURL, sql string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}
