package runtimetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"bex.co/bex/internal/testlayer"
)

// PushTestApp pushes the runtime tests' app, built static, as an image
// with its own root filesystem (/testapp, its entrypoint) or, given the
// stack image's labels (the builder's, which this package may not import),
// as an image of the platform's Go stack (/app/testapp, unpacked as its app
// directory and run on the run base, which has the /bin/sh the kube
// driver's commands need), to ref with auth.
func PushTestApp(t testing.TB, ref, dir string, auth authn.Authenticator, stackLabels map[string]string) {
	t.Helper()
	bin := filepath.Join(dir, BuildTestApp(t, dir))
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	prefix, cfg := "", v1.Config{Entrypoint: []string{"/testapp"}, Env: []string{"VERSION=from-image"}}
	if stackLabels != nil {
		prefix = "app/"
		cfg = v1.Config{Cmd: []string{"/app/testapp"}, WorkingDir: "/app", Env: []string{"PATH=/usr/bin:/bin"},
			Labels: stackLabels}
	}
	entries := []testlayer.Entry{testlayer.Dir("tmp"), testlayer.Dir("etc")}
	if prefix != "" {
		entries = append(entries, testlayer.Dir(prefix))
	}
	layer := testlayer.Layer(t, append(entries, testlayer.File(prefix+"testapp", 0o755, data)))
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, cfg); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
}
