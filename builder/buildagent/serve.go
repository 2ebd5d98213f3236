package buildagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
)

// TokenEnv is the variable the agent's command reads the build's token
// from (the Pod takes it from the build's Secret).
const TokenEnv = "BEX_BUILD_TOKEN"

// ServeOptions are cmd/bex-build-agent's flags.
type ServeOptions struct {
	Listen string
	Dir    string
	// MaxTreeBytes bounds the tree the agent takes.
	MaxTreeBytes int64
	// IdleTimeout ends the agent when no call of the builder's has been in
	// flight for that long: the builder is gone (Agent.WaitIdle).
	IdleTimeout time.Duration
	token       string
}

// DefaultIdleTimeout is --idle-timeout's default. A healthy build leaves
// its agent idle for the builder's own bookkeeping between calls only
// (milliseconds), and a step in flight is a call however long it runs.
const DefaultIdleTimeout = 2 * time.Minute

// AddFlags binds the options to fs.
func (o *ServeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", ":8080", "Address to serve the builder's calls on")
	fs.StringVar(&o.Dir, "dir", "/tmp/bex-build", "Work directory of the build: the checkout, HOME, TMPDIR and the tools' caches")
	fs.Int64Var(&o.MaxTreeBytes, "max-tree-bytes", 512<<20, "Most file content the checkout sent to the agent may hold")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", DefaultIdleTimeout, "Exit when no call of the builder's has been in flight for that long: the builder is gone")
}

// Complete reads the token from the environment and removes it there:
// the steps get the environment the builder sends, and nothing of the
// agent's.
func (o *ServeOptions) Complete() {
	o.token = os.Getenv(TokenEnv)
	_ = os.Unsetenv(TokenEnv)
}

// Validate returns what is wrong with the options.
func (o *ServeOptions) Validate() error {
	if o.token == "" {
		return fmt.Errorf("$%s is empty: the builder's calls are checked against the build's token", TokenEnv)
	}
	if o.Dir == "" {
		return errors.New("--dir is empty")
	}
	if o.MaxTreeBytes <= 0 {
		return fmt.Errorf("--max-tree-bytes %d: want more than 0", o.MaxTreeBytes)
	}
	if o.IdleTimeout <= 0 {
		return fmt.Errorf("--idle-timeout %s: want more than 0", o.IdleTimeout)
	}
	return nil
}

// Run serves on --listen until ctx ends, or returns an error wrapping
// ErrBuilderGone once the builder left the agent idle for --idle-timeout.
func (o *ServeOptions) Run(ctx context.Context, log logr.Logger) error {
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return err
	}
	return o.Serve(ctx, ln, log)
}

// Serve is Run on ln, which it closes.
func (o *ServeOptions) Serve(ctx context.Context, ln net.Listener, log logr.Logger) error {
	a, err := New(Options{Dir: o.Dir, Token: o.token, Log: log})
	if err != nil {
		ln.Close()
		return err
	}
	a.opts.MaxTree.Bytes = o.MaxTreeBytes
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	idle := make(chan error, 1)
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() { idle <- a.WaitIdle(watch, o.IdleTimeout) }()
	log.Info("Serving the build", "addr", ln.Addr().String(), "dir", o.Dir, "idleTimeout", o.IdleTimeout)
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
		<-served
		return nil
	case err := <-idle:
		log.Info("Exiting: no call from the builder", "idleFor", o.IdleTimeout)
		_ = srv.Close()
		<-served
		return err
	}
}
