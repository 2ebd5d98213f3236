package registry_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"bex.co/bex/internal/registry"
)

// TestRequiresToken is what a process on the machine without the token gets
// from the registry: 401 with a challenge for every request, push or pull,
// anonymous or with a wrong token, and nothing stored.
func TestRequiresToken(t *testing.T) {
	dir := t.TempDir()
	addr, _ := serve(t, dir)
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	wrong := remote.WithAuth(registry.Auth("guess"))
	unauthorized := func(what string, err error) {
		t.Helper()
		var terr *transport.Error
		if !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: err = %v, want 401", what, err)
		}
	}

	stolen, _ := name.NewTag(addr + "/evil/web:latest")
	unauthorized("anonymous push", remote.Write(stolen, img))
	unauthorized("push with a wrong token", remote.Write(stolen, img, wrong))
	if stored := filesUnder(dir); len(stored) != 0 {
		t.Errorf("refused pushes stored %v", stored)
	}

	tag, _ := name.NewTag(addr + "/acme/web:v1")
	if err := remote.Write(tag, img, auth); err != nil {
		t.Fatalf("push with the token: %v", err)
	}
	_, err = remote.Image(tag)
	unauthorized("anonymous pull", err)
	_, err = remote.Image(tag, wrong)
	unauthorized("pull with a wrong token", err)
	if _, err := remote.Image(tag, auth); err != nil {
		t.Fatalf("pull with the token: %v", err)
	}

	for _, path := range []string{"/v2/", "/v2/acme/web/tags/list", "/v2/acme/web/manifests/v1"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("anonymous GET %s: %d, challenge %q; want 401 with a Basic challenge", path, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
}

func TestNewRefusesEmptyToken(t *testing.T) {
	if _, err := registry.New(t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "token is required") {
		t.Fatalf("New with no token: err = %v, want one saying a token is required", err)
	}
}
