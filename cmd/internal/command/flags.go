package command

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// NewFlagSet returns an empty flag set of the command name that returns its
// errors (Parse turns them into UsageErrors) and writes help to out.
func NewFlagSet(name string, out io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(out)
	return fs
}

// Parse parses args into fs, then runs steps in order (the options'
// Complete and Validate), stopping at the first error. Every setting is a
// flag: an argument left over is refused. A refused command line, and an
// error of a step, is returned as a UsageError with done set; help is not
// an error, but done is set too: there is nothing to run.
func Parse(fs *pflag.FlagSet, args []string, steps ...func() error) (done bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return true, nil
		}
		return true, Usage(err)
	}
	if fs.NArg() > 0 {
		return true, Usage(fmt.Errorf("unexpected arguments %q: every setting is a flag", fs.Args()))
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return true, Usage(err)
		}
	}
	return false, nil
}

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

// PlatformOptions are the flags of a command that works on the management
// cluster and the platform's store (bex-controller-manager, bex-web,
// bex-git).
type PlatformOptions struct {
	// Kubeconfig is the management cluster's; empty means in-cluster.
	Kubeconfig string
	// DatabaseURL is the Postgres URL of the store.
	DatabaseURL string
}

// NewPlatformOptions returns the defaults: the database URL of the
// environment (DefaultDatabaseURL).
func NewPlatformOptions() PlatformOptions {
	return PlatformOptions{DatabaseURL: DefaultDatabaseURL()}
}

// AddFlags binds --kubeconfig and --database-url to fs. clusterHolds and
// storeHolds, when set, say in the help what the command reads in the
// management cluster and keeps in the store.
func (o *PlatformOptions) AddFlags(fs *pflag.FlagSet, clusterHolds, storeHolds string) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the management cluster"+parenthesis(clusterHolds)+"; empty: in-cluster")
	fs.StringVar(&o.DatabaseURL, "database-url", o.DatabaseURL, "Postgres URL of the platform's store"+parenthesis(storeHolds)+" [$"+EnvDatabaseURL+", else $DATABASE_URL]")
}

// Validate requires a database URL; kept says what the command keeps in
// Postgres ("builds and releases").
func (o *PlatformOptions) Validate(kept string) error {
	if o.DatabaseURL == "" {
		return fmt.Errorf("--database-url (or %s) is required: %s are kept in Postgres", EnvDatabaseURL, kept)
	}
	return nil
}

func parenthesis(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// CobraUsage makes the flag errors of cmd and of its subcommands
// UsageErrors, for the binaries whose command line is a cobra.Command.
func CobraUsage(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return Usage(err) })
}

// ParseSecretName parses flag's NAMESPACE/NAME; empty is the zero name.
func ParseSecretName(flag, v string) (types.NamespacedName, error) {
	if v == "" {
		return types.NamespacedName{}, nil
	}
	ns, name, ok := strings.Cut(v, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return types.NamespacedName{}, fmt.Errorf("%s %q: want NAMESPACE/NAME of a Secret, like bex-system/bex-runtime-kubeconfigs", flag, v)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
