package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"golang.org/x/crypto/ssh"

	"bex.co/bex/builder/build"
	"bex.co/bex/builder/gitaccess"
	"bex.co/bex/builder/gitserver"
	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/cmd/internal/workload"
	"bex.co/bex/internal/httpserve"
	"bex.co/bex/internal/quota"
	"bex.co/bex/internal/store"
)

// hostKeyName is the SSH host key's file in the repository root, when
// --ssh-host-key is not given.
const hostKeyName = "ssh_host_ed25519_key"

// Options are bex-git's flags.
type Options struct {
	command.PlatformOptions
	// RootDir holds <tenant>/<app>.git: the persistent volume.
	RootDir                          string
	HTTPListen, SSHListen, OpsListen string
	// SSHHostKey is the host key's PEM file; created when missing.
	SSHHostKey   string
	MaxPushBytes int64
	// BuildLogLines is how many lines of each build's log are kept.
	BuildLogLines int
	Runtime       workload.Options
	Build         workload.BuildOptions
	// Quotas are the tenants' default quotas: repository size here,
	// concurrent builds and build minutes in the pipeline.
	Quotas *quota.Defaults
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	quotas := quota.NewDefaults()
	return &Options{
		RootDir: "/var/lib/bex/repos", HTTPListen: ":8080", SSHListen: ":2222", OpsListen: ":9090",
		PlatformOptions: command.NewPlatformOptions(), MaxPushBytes: gitserver.DefaultMaxPushBytes,
		BuildLogLines: store.DefaultBuildLogLines,
		Runtime:       workload.Options{WorkDir: "/var/lib/bex/work", Quotas: quotas},
		Build:         workload.BuildOptions{MaxCheckoutBytes: build.DefaultMaxCheckoutBytes, Quotas: quotas},
		Quotas:        quotas,
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.PlatformOptions.AddFlags(fs, "Apps", "")
	fs.StringVar(&o.RootDir, "root-dir", o.RootDir, "Directory of the bare repositories, <tenant>/<app>.git (a persistent volume; one bex-git per directory)")
	fs.StringVar(&o.HTTPListen, "http-listen", o.HTTPListen, "Address of git's smart HTTP (API token as the password)")
	fs.StringVar(&o.SSHListen, "ssh-listen", o.SSHListen, "Address of git over SSH (registered keys); empty turns SSH off")
	fs.StringVar(&o.SSHHostKey, "ssh-host-key", o.SSHHostKey, "PEM file of the SSH host key, created (ed25519) when missing [<root-dir>/"+hostKeyName+"]")
	fs.StringVar(&o.OpsListen, "ops-listen", o.OpsListen, "Address of /metrics, /healthz (liveness) and /readyz; empty turns it off")
	fs.Int64Var(&o.MaxPushBytes, "max-push-bytes", o.MaxPushBytes, "Largest pack one push may send; a larger one is refused before it is stored")
	fs.IntVar(&o.BuildLogLines, "build-log-lines", o.BuildLogLines, "Lines of a build's log kept: past it the oldest are dropped, and the log says so")
	o.Runtime.AddFlags(fs)
	o.Build.AddFlags(fs)
	o.Quotas.AddFlags(fs)
}

// Complete fills the host key's default path.
func (o *Options) Complete() {
	if o.SSHHostKey == "" && o.RootDir != "" {
		o.SSHHostKey = filepath.Join(o.RootDir, hostKeyName)
	}
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if err := o.PlatformOptions.Validate("tokens, SSH keys, builds and releases"); err != nil {
		errs = append(errs, err)
	}
	if o.RootDir == "" {
		errs = append(errs, errors.New("--root-dir is empty"))
	}
	if o.HTTPListen == "" && o.SSHListen == "" {
		errs = append(errs, errors.New("--http-listen and --ssh-listen are both empty: nothing to serve"))
	}
	if o.MaxPushBytes <= 0 {
		errs = append(errs, fmt.Errorf("--max-push-bytes %d: must be positive", o.MaxPushBytes))
	}
	if o.BuildLogLines <= 0 {
		errs = append(errs, fmt.Errorf("--build-log-lines %d: must be positive", o.BuildLogLines))
	}
	errs = append(errs, o.Runtime.Validate()...)
	errs = append(errs, o.Build.Validate()...)
	errs = append(errs, o.Quotas.Validate())
	return errors.Join(errs...)
}

// Run serves until ctx ends. Pushes in flight when it ends are cancelled:
// their refs stay where they were.
func (o *Options) Run(ctx context.Context, log logr.Logger) error {
	if err := os.MkdirAll(o.RootDir, 0o755); err != nil {
		return fmt.Errorf("creating --root-dir: %w", err)
	}
	c, err := command.Open(ctx, o.DatabaseURL, o.Kubeconfig)
	if err != nil {
		return err
	}
	defer c.Store.Close()
	c.Store = c.Store.WithLimits(store.Limits{BuildLogLines: o.BuildLogLines})
	reg := command.NewOpsRegistry()
	o.Runtime.Metrics = reg
	rt, err := o.Runtime.NewRuntime(ctx, c.Store, c.Kube, log)
	if err != nil {
		return err
	}
	pl, err := o.Build.NewPipeline(ctx, &o.Runtime, rt, log)
	if err != nil {
		return err
	}
	git, err := gitserver.New(gitserver.Options{
		Root: o.RootDir, Auth: gitaccess.Auth{Store: c.Store}, Repos: gitaccess.Repos{Kube: c.Kube},
		Deployer: pl, MaxPushBytes: o.MaxPushBytes, Log: log.WithName("git"),
		Quota: quota.RepoQuota{Defaults: o.Quotas, Store: c.Store},
	})
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var listeners []net.Listener
	listen := func(what, addr string) (net.Listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return nil, fmt.Errorf("listening for %s: %w", what, err)
		}
		listeners = append(listeners, l)
		return l, nil
	}
	var serves []func() error
	addrs := []any{}
	if o.HTTPListen != "" {
		l, err := listen("git over HTTP", o.HTTPListen)
		if err != nil {
			return err
		}
		// Pushes stream their build; a long grace lets short ones finish.
		serves = append(serves, func() error {
			return command.Serve(ctx, l, gitserver.HTTPTimeouts().Server(git.HTTPHandler()), 30*time.Second)
		})
		addrs = append(addrs, "http", l.Addr().String())
	}
	if o.SSHListen != "" {
		hostKey, err := gitserver.LoadOrCreateHostKey(o.SSHHostKey)
		if err != nil {
			return err
		}
		l, err := listen("git over SSH", o.SSHListen)
		if err != nil {
			return err
		}
		serves = append(serves, func() error {
			err := git.ServeSSH(ctx, l, hostKey)
			if ctx.Err() != nil {
				return nil
			}
			return err
		})
		addrs = append(addrs, "ssh", l.Addr().String(), "hostKey", ssh.FingerprintSHA256(hostKey.PublicKey()))
	}
	if o.OpsListen != "" {
		l, err := listen("metrics and probes", o.OpsListen)
		if err != nil {
			return err
		}
		serves = append(serves, func() error {
			return command.Serve(ctx, l, httpserve.OpsTimeouts().Server(command.OpsHandler(reg, c.StoreReady, c.KubeReady)), time.Second)
		})
		addrs = append(addrs, "ops", l.Addr().String())
	}
	errc := make(chan error, len(serves))
	for _, serve := range serves {
		go func() { errc <- serve() }()
	}
	log.Info("Serving", addrs...)
	var errs []error
	for range serves {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	return errors.Join(errs...)
}

// Main is bex-git's command line: it parses args (without the program
// name), completes, validates and runs the options until ctx ends. Logs and
// help go to out. A refused command line is a command.UsageError.
func Main(ctx context.Context, args []string, out io.Writer) error {
	o := NewOptions()
	fs := command.NewFlagSet("bex-git", out)
	o.AddFlags(fs)
	if done, err := command.Parse(fs, args); done {
		return err
	}
	o.Complete()
	if err := o.Validate(); err != nil {
		return command.Usage(err)
	}
	return o.Run(ctx, command.NewLogger(out))
}
