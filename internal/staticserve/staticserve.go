package staticserve

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"bex.co/bex/internal/httpserve"
)

// Options configure a static file server.
type Options struct {
	// Dir is the directory to serve; the default is the working directory.
	Dir string
	// Port is the TCP port to listen on; the default is $PORT.
	Port string
	// Host is the address to listen on; empty means every address.
	Host string
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Dir, "dir", o.Dir, "directory to serve (default: the working directory)")
	fs.StringVar(&o.Port, "port", o.Port, "port to listen on (default: $PORT)")
	fs.StringVar(&o.Host, "host", o.Host, "address to listen on (default: all)")
}

// Complete fills in the defaults from the environment.
func (o *Options) Complete() {
	if o.Dir == "" {
		o.Dir = "."
	}
	if o.Port == "" {
		o.Port = os.Getenv("PORT")
	}
}

// Validate reports what is missing or wrong.
func (o *Options) Validate() error {
	if o.Port == "" {
		return errors.New("no port: set $PORT or --port")
	}
	if n, err := strconv.Atoi(o.Port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("invalid port %q", o.Port)
	}
	fi, err := os.Stat(o.Dir)
	if err != nil {
		return fmt.Errorf("directory to serve: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", o.Dir)
	}
	return nil
}

// Timeouts are bex-static's limits: GET requests without bodies, answered
// from local files. Write leaves 5 minutes for a large file to a slow
// client.
func Timeouts() httpserve.Timeouts {
	return httpserve.Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 5 * time.Minute, Idle: 120 * time.Second}
}

// Run serves until ctx is done, then shuts down gracefully. The directory
// is the tenant's: it is served through an os.Root, so that a symbolic link,
// or a chain of links, that leads outside it answers 404, never the file;
// links that stay inside are followed.
func (o *Options) Run(ctx context.Context) error {
	root, err := os.OpenRoot(o.Dir)
	if err != nil {
		return fmt.Errorf("opening the directory to serve: %w", err)
	}
	defer root.Close()
	l, err := net.Listen("tcp", net.JoinHostPort(o.Host, o.Port))
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	srv := Timeouts().Server(Handler(root.FS()))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}

// Handler serves the files of fsys. fsys decides which links are followed:
// give it an os.Root's FS (as Run does), never os.DirFS, which follows
// links out of the directory.
func Handler(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		p := path.Clean("/" + r.URL.Path)
		if hidden(p) {
			notFound(w, r, fsys)
			return
		}
		if p != "/" {
			if _, err := fs.Stat(fsys, strings.TrimPrefix(p, "/")); err != nil {
				notFound(w, r, fsys)
				return
			}
		}
		files.ServeHTTP(w, r)
	})
}

// hidden reports whether p has a dotfile element outside /.well-known/.
func hidden(p string) bool {
	for i, elem := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if strings.HasPrefix(elem, ".") && !(i == 0 && elem == ".well-known") {
			return true
		}
	}
	return false
}

func notFound(w http.ResponseWriter, r *http.Request, fsys fs.FS) {
	if b, err := fs.ReadFile(fsys, "404.html"); err == nil {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		if r.Method != http.MethodHead {
			_, _ = w.Write(b)
		}
		return
	}
	http.NotFound(w, r)
}
