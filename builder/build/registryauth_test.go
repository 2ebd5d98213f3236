package build_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/registry"
)

// serveRegistry serves a platform registry with token on a loopback port
// for the test and returns its host:port.
func serveRegistry(t *testing.T, token string) string {
	t.Helper()
	reg, err := registry.New(t.TempDir(), token)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg.Handler())
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// A registry that wants credentials, as a production install's does: the
// builder pushes and Unpack pulls with those of the docker configuration,
// and without them the build fails saying where they come from.
func TestRegistryCredentialsFromDockerConfig(t *testing.T) {
	const token = "s3cret"
	addr := serveRegistry(t, token)
	b := newBuilder(t, func(o *build.Options) { o.Registry, o.RegistryAuth = addr, nil })
	app := map[string]string{"index.html": "<h1>private</h1>\n"}

	t.Run("without credentials", func(t *testing.T) {
		t.Setenv("DOCKER_CONFIG", t.TempDir())
		_, log, err := buildRepo(t, b, app, nil)
		if err == nil {
			t.Fatal("the build pushed to a registry that wants credentials without any")
		}
		for _, want := range []string{"401", "DOCKER_CONFIG"} {
			if !strings.Contains(err.Error(), want) || !strings.Contains(log, want) {
				t.Errorf("the error and the log should name %q: %v\n%s", want, err, log)
			}
		}
	})

	t.Run("with credentials", func(t *testing.T) {
		dir := t.TempDir()
		auth := base64.StdEncoding.EncodeToString([]byte(registry.Username + ":" + token))
		config := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, addr, auth)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("DOCKER_CONFIG", dir)
		res, _, err := buildRepo(t, b, app, nil)
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		cfg, err := build.Unpack(context.Background(), res.Image, filepath.Join(t.TempDir(), "release"))
		if err != nil {
			t.Fatalf("Unpack with the same credentials: %v", err)
		}
		got, err := os.ReadFile(filepath.Join(cfg.WorkingDir, "index.html"))
		if err != nil || string(got) != app["index.html"] {
			t.Errorf("unpacked index.html %q, %v", got, err)
		}
	})
}

// The platform registry's token given as Options.RegistryAuth, as embedded
// mode does, with no docker configuration: the builder pushes with it and
// Unpack pulls with the builder's Keychain; Unpack without it, or a builder
// with a wrong token, is refused.
func TestRegistryAuthOption(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	const token = "platform-token"
	addr := serveRegistry(t, token)
	app := map[string]string{"index.html": "<h1>token</h1>\n"}

	wrong := newBuilder(t, func(o *build.Options) { o.Registry, o.RegistryAuth = addr, registry.Auth("guess") })
	if _, _, err := buildRepo(t, wrong, app, nil); !isUnauthorized(err) {
		t.Errorf("a builder with a wrong token: err = %v, want 401", err)
	}

	b := newBuilder(t, func(o *build.Options) { o.Registry, o.RegistryAuth = addr, registry.Auth(token) })
	res, _, err := buildRepo(t, b, app, nil)
	if err != nil {
		t.Fatalf("Build with the token: %v", err)
	}
	if _, err := build.Unpack(context.Background(), res.Image, filepath.Join(t.TempDir(), "anonymous")); !isUnauthorized(err) {
		t.Errorf("Unpack without the token: err = %v, want 401", err)
	}
	cfg, err := build.Unpack(context.Background(), res.Image, filepath.Join(t.TempDir(), "release"), b.Keychain())
	if err != nil {
		t.Fatalf("Unpack with the builder's keychain: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(cfg.WorkingDir, "index.html")); err != nil || string(got) != app["index.html"] {
		t.Errorf("unpacked index.html %q, %v", got, err)
	}
}

func isUnauthorized(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusUnauthorized
}
