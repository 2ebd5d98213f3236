package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// The app's answers: a small body on every path, and largeBodySize bytes on
// /16k.
const (
	smallBody     = "Hello, world\n"
	largeBodySize = 16 << 10
)

// newAppCommand is the hidden "app" subcommand: the app the proxies stand in
// front of, serving on the listener it inherits as file descriptor 3.
func newAppCommand() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:    "app",
		Short:  "Serve the benchmark's app on inherited file descriptor 3",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var l net.Listener
			var err error
			if listen != "" {
				l, err = net.Listen("tcp", listen)
			} else {
				l, err = inheritedListener(3, "app")
			}
			if err != nil {
				return err
			}
			return serveApp(cmd.Context(), l)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on instead of file descriptor 3 (in a sandbox)")
	return cmd
}

func serveApp(ctx context.Context, l net.Listener) error {
	small, large := []byte(smallBody), bytes.Repeat([]byte("0123456789abcdef"), largeBodySize/16)
	smallLen, largeLen := strconv.Itoa(len(small)), strconv.Itoa(len(large))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, n := small, smallLen
		if r.URL.Path == "/16k" {
			b, n = large, largeLen
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", n)
		_, _ = w.Write(b)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// inheritedListener returns the listener a parent handed down as file
// descriptor fd.
func inheritedListener(fd uintptr, name string) (net.Listener, error) {
	f := os.NewFile(fd, name)
	if f == nil {
		return nil, errors.New("no inherited file descriptor for " + name)
	}
	defer f.Close()
	return net.FileListener(f)
}
