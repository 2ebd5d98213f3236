package clustermode

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/controllers"
	"bex.co/bex/internal/kubeconfig"
	"bex.co/bex/internal/store"
)

// EnvDatabaseURL is the variable --database-url defaults to; DATABASE_URL is
// read when it is unset, as bex-edge and bex-embedded do.
const EnvDatabaseURL = "BEX_DATABASE_URL"

// DefaultDatabaseURL returns $BEX_DATABASE_URL, else $DATABASE_URL.
func DefaultDatabaseURL() string {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return u
	}
	return os.Getenv("DATABASE_URL")
}

// UsageError is a command line the command refuses: a flag it does not
// know, a value it cannot parse, a required flag missing. Mains exit 2 on
// it, like Go's flag package, and 1 on every other error.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usage wraps err as a UsageError; nil stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{Err: err}
}

// ExitCode is the process exit code for a command's error: 0 for nil, 2 for
// a UsageError, 1 otherwise.
func ExitCode(err error) int {
	var ue *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

// Parse parses args into fs; help is not an error (it returns done).
func Parse(fs *pflag.FlagSet, args []string) (done bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return true, nil
		}
		return true, Usage(err)
	}
	if fs.NArg() > 0 {
		return true, Usage(fmt.Errorf("unexpected arguments %q: every setting is a flag", fs.Args()))
	}
	return false, nil
}

// Clients are the store and the management cluster's client every command
// opens first.
type Clients struct {
	Store *store.Store
	// Config reaches the management cluster.
	Config *rest.Config
	// Kube is an uncached client of the management cluster with the
	// controllers' scheme.
	Kube client.Client
}

// Open opens the store (migrating it) and a client of the management
// cluster (kubeconfig, else in-cluster). Close the store when done.
func Open(ctx context.Context, databaseURL, kubeconfigPath string) (*Clients, error) {
	cfg, err := kubeconfig.Load(kubeconfigPath, "management cluster")
	if err != nil {
		return nil, err
	}
	kube, err := client.New(cfg, client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	st, err := store.Open(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	return &Clients{Store: st, Config: cfg, Kube: kube}, nil
}

// KubeReady is a readiness check: the management cluster's apiserver
// answers a list.
func (c *Clients) KubeReady(ctx context.Context) error {
	var nss corev1.NamespaceList
	if err := c.Kube.List(ctx, &nss, client.Limit(1)); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	return nil
}

// StoreReady is a readiness check: Postgres answers.
func (c *Clients) StoreReady(ctx context.Context) error { return c.Store.Pool().Ping(ctx) }
