package registry_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"bex.co/bex/internal/registry"
)

// testToken is the token of every registry the tests serve.
const testToken = "test-token"

// auth is the option that presents testToken.
var auth = remote.WithAuth(registry.Auth(testToken))

// serve starts the registry kept in dir on a loopback port and returns its
// host:port and a function that stops it and waits for Serve to return.
func serve(t *testing.T, dir string) (string, func()) {
	t.Helper()
	r, err := registry.New(dir, testToken)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx, l) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return l.Addr().String(), stop
}

func TestImagesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	addr, stop := serve(t, dir)

	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(addr + "/acme/web:abc123")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, auth); err != nil {
		t.Fatalf("pushing: %v", err)
	}
	stop()

	addr, _ = serve(t, dir)
	for _, ref := range []string{addr + "/acme/web:abc123", addr + "/acme/web@" + want.String()} {
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		got, err := remote.Image(r, auth)
		if err != nil {
			t.Fatalf("pulling %s after restart: %v", ref, err)
		}
		d, err := got.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d != want {
			t.Errorf("%s: digest %s, want %s", ref, d, want)
		}
		layers, err := got.Layers()
		if err != nil {
			t.Fatal(err)
		}
		if len(layers) != 2 {
			t.Fatalf("%s: %d layers, want 2", ref, len(layers))
		}
		for _, l := range layers {
			rc, err := l.Compressed() // remote layers verify their digest while read
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil {
				t.Errorf("%s: reading layer: %v", ref, err)
			}
		}
	}
}

func TestDeletedTagStaysDeleted(t *testing.T) {
	dir := t.TempDir()
	addr, stop := serve(t, dir)
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(addr + "/acme/web:old")
	if err := remote.Write(tag, img, auth); err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(tag, auth); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	stop()
	addr, _ = serve(t, dir)
	tag, _ = name.NewTag(addr + "/acme/web:old")
	_, err = remote.Image(tag, auth)
	var terr *transport.Error
	if !errors.As(err, &terr) || terr.StatusCode != http.StatusNotFound {
		t.Fatalf("pulling a deleted tag after restart: %v, want 404", err)
	}
}

func TestRefusesNamesOutsideGrammar(t *testing.T) {
	dir := t.TempDir()
	addr, _ := serve(t, dir)
	for _, path := range []string{
		"/v2/../../etc/manifests/x",
		"/v2/acme/%2e%2e/manifests/x",
		"/v2/Acme/web/manifests/latest",
		"/v2/acme/web/manifests/..%2f..%2fescape",
	} {
		req, err := http.NewRequest(http.MethodPut, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.RawPath = "" // keep the path as written
		req.URL.Opaque = "//" + addr + path
		req.SetBasicAuth(registry.Username, testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("PUT %s: status %d, want 400", path, resp.StatusCode)
		}
	}
	if outside := filesUnder(dir); len(outside) != 0 {
		t.Errorf("refused requests wrote %v", outside)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "etc")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a request reached outside the registry directory")
	}
}

// filesUnder returns the files (not directories) under dir.
func filesUnder(dir string) []string {
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	return files
}
