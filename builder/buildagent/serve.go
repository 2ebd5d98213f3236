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
	token        string
}

// AddFlags binds the options to fs.
func (o *ServeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", ":8080", "Address to serve the builder's calls on")
	fs.StringVar(&o.Dir, "dir", "/tmp/bex-build", "Work directory of the build: the checkout, HOME, TMPDIR and the tools' caches")
	fs.Int64Var(&o.MaxTreeBytes, "max-tree-bytes", 512<<20, "Most file content the checkout sent to the agent may hold")
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
	return nil
}

// Run serves until ctx ends.
func (o *ServeOptions) Run(ctx context.Context, log logr.Logger) error {
	a, err := New(Options{Dir: o.Dir, Token: o.token, Log: log})
	if err != nil {
		return err
	}
	a.opts.MaxTree.Bytes = o.MaxTreeBytes
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	log.Info("Serving the build", "addr", ln.Addr().String(), "dir", o.Dir)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
