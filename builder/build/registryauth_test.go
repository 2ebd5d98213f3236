package build_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/registry"
)

// A registry that wants credentials, as a production install's does: the
// builder pushes and Unpack pulls with those of the docker configuration,
// and without them the build fails saying where they come from.
func TestRegistryCredentialsFromDockerConfig(t *testing.T) {
	reg, err := registry.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const user, password = "bex", "s3cret"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="bex-test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		reg.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	b := newBuilder(t, func(o *build.Options) { o.Registry = addr })
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
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
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
