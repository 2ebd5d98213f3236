package build_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/builder/build"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/testlayer"
)

// nodeApp is a Node app whose build runs no tool: no dependencies, no build
// script.
var nodeApp = map[string]string{
	"package.json": `{"name": "hello", "main": "server.js"}`,
	"server.js":    "require('http').createServer((req, res) => res.end('hi')).listen(process.env.PORT)\n",
}

// runBaseEnv is the environment of the run images the tests make.
var runBaseEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "NODE_ENV=development"}

// makeRunImage returns a run image for linux/arch: one layer with bin/sh
// (holding marker, so that every image's layer is its own), runBaseEnv, an
// entrypoint, a user and labels, one of them a bex process label that must
// not reach the app. docker makes a Docker schema 2 image, else OCI.
func makeRunImage(t *testing.T, arch, marker string, docker bool) v1.Image {
	t.Helper()
	manifest, config, layerType := types.OCIManifestSchema1, types.OCIConfigJSON, types.OCILayer
	if docker {
		manifest, config, layerType = types.DockerManifestSchema2, types.DockerConfigJSON, types.DockerLayer
	}
	layer := testlayer.Layer(t, []testlayer.Entry{testlayer.Dir("bin"), testlayer.File("bin/sh", 0o755, []byte(marker))},
		tarball.WithMediaType(layerType))
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, manifest), config)
	img, err := mutate.ConfigFile(img, &v1.ConfigFile{
		OS: "linux", Architecture: arch, RootFS: v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Env: runBaseEnv, Entrypoint: []string{"/bin/sh"}, User: "1000",
			Labels: map[string]string{"org.opencontainers.image.title": "run", build.LabelProcessPrefix + "web": "leaked"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: layerType})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// otherArch is an architecture the builder does not run on.
func otherArch() string {
	if runtime.GOARCH == "arm64" {
		return "amd64"
	}
	return "arm64"
}

func digestOf(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func pull(t *testing.T, ref string) (v1.Image, *v1.ConfigFile) {
	t.Helper()
	img, err := remote.Image(mustRef(t, ref), registryAuth)
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return img, cf
}

func mustRef(t *testing.T, ref string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func layerDigests(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Hash
	for _, l := range ls {
		out = append(out, digestOf(t, l))
	}
	return out
}

// TestRunImage builds a Node app on a run image pushed as an index of two
// platforms and reads the image back: the run image's layers (of the
// builder's platform) then the app's; the environment merged (the stack's
// values win, PATH is the app's entries then the run image's PATH); /app
// as working directory; the run image's user, OS and architecture; its
// labels but not its bex ones; the label naming the run image by digest.
// The tag is then moved to a Docker image: the next build is laid on it.
// Unpack reads the app's layer only: it works with the run image's layer
// deleted from the registry.
func TestRunImage(t *testing.T) {
	native := makeRunImage(t, runtime.GOARCH, "sh of "+t.Name(), false)
	foreign := makeRunImage(t, otherArch(), "sh of "+t.Name()+" for "+otherArch(), false)
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: foreign, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: otherArch()}}},
		mutate.IndexAddendum{Add: native, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
	)
	ref := registryAddr + "/bex/run:24"
	if err := remote.WriteIndex(mustRef(t, ref), idx, registryAuth); err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, func(o *build.Options) { o.RunImage = ref })
	res, log, err := buildRepo(t, b, nodeApp, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if res.Stack != platformv1alpha1.StackNode || res.Processes["web"] != "node server.js" {
		t.Fatalf("stack %q processes %v, want node with web = node server.js", res.Stack, res.Processes)
	}
	pinned := registryAddr + "/bex/run@" + digestOf(t, native).String()
	if !strings.Contains(log, "-----> Building on run image "+pinned+"\n") {
		t.Errorf("log does not name the run image %s", pinned)
	}

	img, cf := pull(t, res.Image)
	baseLayers := layerDigests(t, native)
	layers := layerDigests(t, img)
	if len(layers) != len(baseLayers)+1 || !slices.Equal(layers[:len(baseLayers)], baseLayers) {
		t.Fatalf("layers %v, want the run image's %v and the app's", layers, baseLayers)
	}
	if got := cf.Config.Labels[build.LabelAppLayer]; got != cf.RootFS.DiffIDs[len(layers)-1].String() {
		t.Errorf("label %s = %q, want the last layer's diff ID %s", build.LabelAppLayer, got, cf.RootFS.DiffIDs[len(layers)-1])
	}
	wantEnv := []string{"PATH=/app/node_modules/.bin:/app/bin:/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "NODE_ENV=production"}
	if !slices.Equal(cf.Config.Env, wantEnv) {
		t.Errorf("env %q, want %q", cf.Config.Env, wantEnv)
	}
	if cf.Config.WorkingDir != "/app" || cf.Config.User != "1000" || cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("working dir %q, user %q, platform %s/%s; want /app, the run image's 1000, linux/%s",
			cf.Config.WorkingDir, cf.Config.User, cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if cf.Config.Entrypoint != nil || !slices.Equal(cf.Config.Cmd, []string{"/bin/sh", "-c", "node server.js"}) {
		t.Errorf("entrypoint %q cmd %q, want none and the web process in sh", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	for k, want := range map[string]string{
		build.LabelRunImage:              pinned,
		build.LabelStack:                 "node",
		build.LabelProcessPrefix + "web": "node server.js",
		"org.opencontainers.image.title": "run",
	} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s %v, want OCI", mt, err)
	}
	// The app's layer is zstd in an OCI image; the run image's stay as
	// they were.
	if m, err := img.Manifest(); err != nil || m.Layers[0].MediaType != types.OCILayer || m.Layers[len(m.Layers)-1].MediaType != types.OCILayerZStd {
		t.Errorf("manifest %+v %v: want the run image's gzip layer, then the app's tar+zstd", m, err)
	}
	if magic := layerMagic(t, img); !bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Errorf("the app's layer starts with % x, not zstd's magic number", magic)
	}

	// The tag moves to a Docker image: the next build is laid on it, with
	// a Docker layer.
	moved := makeRunImage(t, runtime.GOARCH, "sh of "+t.Name()+", moved", true)
	if err := remote.Write(mustRef(t, ref), moved, registryAuth); err != nil {
		t.Fatal(err)
	}
	res2, _, err := buildRepo(t, b, nodeApp, nil)
	if err != nil {
		t.Fatalf("Build on the moved tag: %v", err)
	}
	img2, cf2 := pull(t, res2.Image)
	if want := registryAddr + "/bex/run@" + digestOf(t, moved).String(); cf2.Config.Labels[build.LabelRunImage] != want {
		t.Errorf("after the tag moved: label %s = %q, want %q", build.LabelRunImage, cf2.Config.Labels[build.LabelRunImage], want)
	}
	m, err := img2.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.DockerManifestSchema2 || len(m.Layers) != 2 || m.Layers[1].MediaType != types.DockerLayer {
		t.Errorf("on a Docker run image: manifest %s with layers %v, want a Docker manifest with the app's Docker layer second", m.MediaType, m.Layers)
	}

	// Unpack of the first image with the run image's layer gone.
	for _, l := range baseLayers {
		req, err := http.NewRequest(http.MethodDelete, "http://"+registryAddr+"/v2/bex/run/blobs/"+l.String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(registry.Username, registryToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("deleting blob %s: %s", l, resp.Status)
		}
	}
	dir := filepath.Join(t.TempDir(), "release")
	ic, err := build.Unpack(context.Background(), res.Image, dir, b.Keychain())
	if err != nil {
		t.Fatalf("Unpack without the run image's layers: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "server.js")); err != nil {
		t.Errorf("server.js not unpacked: %v", err)
	}
	if ic.Processes["web"] != "node server.js" || !slices.Contains(ic.Env, "PATH="+filepath.Join(dir, "node_modules/.bin")+":"+filepath.Join(dir, "bin")+":/usr/local/bin:/usr/bin:/bin") {
		t.Errorf("unpacked config: processes %v env %q", ic.Processes, ic.Env)
	}
	// Inspect reads the same configuration without unpacking, with the
	// image's own paths: what a cluster that pulls the image runs.
	got, err := build.Inspect(context.Background(), res.Image, b.Keychain())
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if got.Digest != ic.Digest || got.RootFS || got.Processes["web"] != "node server.js" || got.WorkingDir != "/app" ||
		!slices.Contains(got.Env, "PATH=/app/node_modules/.bin:/app/bin:/usr/local/bin:/usr/bin:/bin") {
		t.Errorf("inspected config: %+v", got)
	}
}

// TestRunImageMissing: a run image that does not exist fails the build
// before the app's build steps, naming the image and what to do, in the
// error and at the end of the log.
func TestRunImageMissing(t *testing.T) {
	ref := registryAddr + "/bex/no-such-run-image:1"
	b := newBuilder(t, func(o *build.Options) { o.RunImage = ref })
	_, log, err := buildRepo(t, b, nodeApp, nil)
	want := "run image " + ref + " cannot be pulled: push it, or point the builder's run image (bex-git --run-image) at one it can pull"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %v, want it to start with %q", err, want)
	}
	if !strings.Contains(log, " !     Build failed: "+want) {
		t.Errorf("log does not end with the failure")
	}
	if strings.Contains(log, "Discovering process types") {
		t.Errorf("the build went on after the run image failed")
	}

	if _, err := build.New(build.Options{WorkRoot: workRoot, Registry: registryAddr, RunImage: "Not A Reference"}); err == nil {
		t.Errorf("New accepted an invalid run image reference")
	}
}

// TestRunImageOfAnotherPlatform: a single-platform run image of another
// architecture than the builder's is refused, naming both.
func TestRunImageOfAnotherPlatform(t *testing.T) {
	ref := registryAddr + "/bex/foreign-run:1"
	if err := remote.Write(mustRef(t, ref), makeRunImage(t, otherArch(), "sh of "+t.Name(), false), registryAuth); err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, func(o *build.Options) { o.RunImage = ref })
	_, _, err := buildRepo(t, b, nodeApp, nil)
	want := "run image " + ref + " is for linux/" + otherArch() + ", not linux/" + runtime.GOARCH
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %v, want it to start with %q", err, want)
	}
}

// TestImageWithoutRunImage: without a run image the image is one layer on
// nothing, with the stack's own environment and the builder's platform.
func TestImageWithoutRunImage(t *testing.T) {
	b := newBuilder(t)
	res, log, err := buildRepo(t, b, nodeApp, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if strings.Contains(log, "run image") {
		t.Errorf("log names a run image")
	}
	img, cf := pull(t, res.Image)
	if n := len(layerDigests(t, img)); n != 1 {
		t.Errorf("%d layers, want 1", n)
	}
	wantEnv := []string{"PATH=/app/node_modules/.bin:/app/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "NODE_ENV=production"}
	if !slices.Equal(cf.Config.Env, wantEnv) || cf.Config.WorkingDir != "/app" || cf.OS != runtime.GOOS || cf.Architecture != runtime.GOARCH {
		t.Errorf("env %q working dir %q platform %s/%s", cf.Config.Env, cf.Config.WorkingDir, cf.OS, cf.Architecture)
	}
	if _, ok := cf.Config.Labels[build.LabelRunImage]; ok {
		t.Errorf("label %s set without a run image", build.LabelRunImage)
	}
}

// layerMagic is the first four bytes of img's last layer as stored.
func layerMagic(t *testing.T, img v1.Image) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[len(layers)-1].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(rc, magic); err != nil {
		t.Fatal(err)
	}
	return magic
}
