package app_test

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"bex.co/bex/cmd/bex-images/app"
	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/internal/testlayer"
)

// TestPublish builds bex-edge (minimal base) and bex-build-agent (on a
// toolchain base the test pushes) for linux/amd64 through the command
// line, then pulls what the chart would run for the same registry and tag.
// bex-build-agent stands for the toolchain base's components: bex-git is
// laid the same way, and compiling it would double the test's time.
func TestPublish(t *testing.T) {
	host := startRegistry(t)
	base := pushToolchainBase(t, host, "amd64")
	prefix := host + "/bex"

	revision := gitHead(t, moduleRoot(t))
	out, progress, err := run(t, "--registry", prefix, "--tag", "t1", "--platform", "linux/amd64",
		"--components", "bex-edge,bex-build-agent", "--toolchain-base", base.ref)
	if err != nil {
		t.Fatalf("bex-images: %v\n%s", err, progress)
	}
	t.Logf("progress:\n%s", progress)
	checkRevision := revision == gitHead(t, moduleRoot(t))
	if !checkRevision {
		t.Log("a commit came while the images were built: the revision label is not checked")
	}
	var chart struct {
		Sources []string `json:"sources"`
	}
	readYAML(t, "deploy/chart/bex/Chart.yaml", &chart)
	if len(chart.Sources) == 0 {
		t.Fatal("Chart.yaml names no source")
	}
	for _, component := range []string{"bex-edge", "bex-build-agent"} {
		ref := chartImage(t, prefix, component, "t1")
		img, err := remote.Image(ref)
		if err != nil {
			t.Fatalf("pulling %s, the image the chart runs: %v", ref, err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if want := ref.String() + "@" + d.String(); !slices.Contains(strings.Split(out, "\n"), want) {
			t.Errorf("output does not name %s:\n%s", want, out)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		bin := "/usr/local/bin/" + component
		if got := cf.Config.Entrypoint; !slices.Equal(got, []string{bin}) {
			t.Errorf("%s: entrypoint %q, want [%s] (the chart passes only args)", component, got, bin)
		}
		if len(cf.Config.Cmd) != 0 {
			t.Errorf("%s: cmd %q, want none", component, cf.Config.Cmd)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("%s: user %q, want 65532:65532 (the chart's runAsUser)", component, cf.Config.User)
		}
		if cf.OS != "linux" || cf.Architecture != "amd64" {
			t.Errorf("%s: platform %s/%s, want linux/amd64", component, cf.OS, cf.Architecture)
		}
		wantLabels := map[string]string{
			"org.opencontainers.image.version":  "t1",
			"org.opencontainers.image.source":   chart.Sources[0],
			"org.opencontainers.image.revision": revision,
		}
		for k, v := range wantLabels {
			if k == "org.opencontainers.image.revision" && !checkRevision {
				continue
			}
			if got, ok := cf.Config.Labels[k]; v != "" && got != v || v == "" && ok {
				t.Errorf("%s: label %s = %q, want %q", component, k, got, v)
			}
		}

		files := flatten(t, img, bin, "/etc/passwd", "/etc/ssl/certs/ca-certificates.crt", "/usr/bin/git")
		exe, ok := files[bin]
		if !ok {
			t.Fatalf("%s: no %s in the image", component, bin)
		}
		checkBinary(t, exe, component, elf.EM_X86_64, "amd64")

		switch component {
		case "bex-edge":
			if !strings.Contains(string(files["/etc/passwd"]), ":65532:65532:") {
				t.Errorf("bex-edge: /etc/passwd has no user 65532:\n%s", files["/etc/passwd"])
			}
			hostCA, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
			if err == nil && !bytes.Equal(files["/etc/ssl/certs/ca-certificates.crt"], hostCA) {
				t.Error("bex-edge: /etc/ssl/certs/ca-certificates.crt is not the build host's CA bundle")
			}
			if _, ok := files["/usr/bin/git"]; ok {
				t.Error("bex-edge: has the toolchain base's /usr/bin/git")
			}
		case "bex-build-agent":
			checkOnBase(t, img, files, base, "amd64")
			if !slices.Contains(cf.Config.Env, "PATH=/usr/local/bin:/usr/bin:/bin") {
				t.Errorf("bex-build-agent: env %q lost the base's PATH", cf.Config.Env)
			}
		}
	}
}

// TestPublishMultiPlatform builds bex-build-agent for two platforms on a
// toolchain base that is an index of both: one index, each entry the right
// binary laid on the base's image for its platform.
func TestPublishMultiPlatform(t *testing.T) {
	host := startRegistry(t)
	base := pushToolchainBase(t, host, "amd64", "arm64")
	prefix := host + "/bex"
	out, progress, err := run(t, "--registry", prefix, "--tag", "multi", "--platform", "linux/amd64,linux/arm64",
		"--components", "bex-build-agent", "--toolchain-base", base.ref)
	if err != nil {
		t.Fatalf("bex-images: %v\n%s", err, progress)
	}
	ref := chartImage(t, prefix, "bex-build-agent", "multi")
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("pulling the index %s: %v", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, ref.String()+"@"+d.String()) {
		t.Errorf("output does not name the index %s@%s:\n%s", ref, d, out)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	const bin = "/usr/local/bin/bex-build-agent"
	var got []string
	for _, m := range im.Manifests {
		if m.Platform == nil {
			t.Fatalf("index entry %s has no platform", m.Digest)
		}
		arch := m.Platform.Architecture
		got = append(got, m.Platform.String())
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != arch {
			t.Errorf("entry %s: config architecture %s", m.Platform, cf.Architecture)
		}
		files := flatten(t, img, bin, "/usr/bin/git")
		checkBinary(t, files[bin], "bex-build-agent", want[arch], arch)
		checkOnBase(t, img, files, base, arch)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("index platforms %q, want linux/amd64 and linux/arm64", got)
	}
}

// TestRefused: command lines that cannot give the chart working images are
// refused as usage errors (exit code 2), saying what to supply, before
// anything is pushed.
func TestRefused(t *testing.T) {
	host := startRegistry(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
		// dontWant: components that need no base given are not named.
		dontWant []string
	}{
		{"bex-git without a toolchain base", []string{"--registry", host, "--components", "bex-edge,bex-git"},
			[]string{"bex-git needs --toolchain-base", "git, go, node and npm, python3 and buildctl"}, nil},
		{"all without bases", []string{"--registry", host},
			[]string{"bex-git needs --toolchain-base"}, []string{"bex-controller-manager", "bex-web", "bex-edge", "bex-apiserver"}},
		{"unknown component", []string{"--registry", host, "--components", "bex-edge,bex-builder"},
			[]string{`unknown component "bex-builder"`, "known: bex-controller-manager, bex-apiserver, bex-web, bex-git, bex-build-agent, bex-edge"}, nil},
		{"no registry", []string{"--components", "bex-edge"}, []string{"--registry is required"}, nil},
		{"registry with a scheme", []string{"--registry", "https://" + host, "--components", "bex-edge"}, []string{"without a scheme"}, nil},
		{"not linux", []string{"--registry", host, "--components", "bex-edge", "--platform", "darwin/arm64"}, []string{"want linux/ARCH"}, nil},
		{"no CA bundle for the minimal base", []string{"--registry", host, "--components", "bex-edge", "--ca-bundle", filepath.Join(t.TempDir(), "none.pem")},
			[]string{"--ca-bundle", "--static-base"}, nil},
		{"bad tag", []string{"--registry", host, "--components", "bex-edge", "--tag", "-x"}, []string{`--tag "-x"`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			if err == nil {
				t.Fatal("accepted")
			}
			if code := command.ExitCode(err); code != 2 {
				t.Errorf("exit code %d, want 2: %v", code, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			for _, w := range tc.dontWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error names %s, which needs no base given:\n%v", w, err)
				}
			}
		})
	}
	repos, err := remote.Catalog(t.Context(), mustRegistry(t, host))
	if err != nil {
		t.Fatal(err)
	}
	if len(repos) != 0 {
		t.Errorf("refused command lines pushed %q", repos)
	}
}

func run(t *testing.T, args ...string) (out, progress string, err error) {
	t.Helper()
	var o, p bytes.Buffer
	err = app.Main(t.Context(), args, &o, &p)
	return o.String(), p.String(), err
}

func startRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func mustRegistry(t *testing.T, host string) name.Registry {
	r, err := name.NewRegistry(host, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// gitScript is the /usr/bin/git of the toolchain base for arch: each
// platform's base has a layer of its own.
func gitScript(arch string) string {
	return "#!/bin/sh\necho 'git version 2.99.0 (test toolchain, " + arch + ")'\n"
}

type toolchainBase struct {
	ref string
	// layers are the layers of the base's image for each architecture.
	layers map[string][]v1.Hash
}

// pushToolchainBase pushes a toolchain base for linux and each of archs: an
// image with /usr/bin/git (a shell script, gitScript), a PATH and a source
// label of its own; an index of those images for more than one arch.
func pushToolchainBase(t *testing.T, host string, archs ...string) toolchainBase {
	t.Helper()
	base := toolchainBase{ref: host + "/toolchain:test", layers: map[string][]v1.Hash{}}
	var adds []mutate.IndexAddendum
	var img v1.Image
	for _, arch := range archs {
		script := gitScript(arch)
		layer := testlayer.Layer(t, []testlayer.Entry{
			testlayer.Dir("usr"), testlayer.Dir("usr/bin"), testlayer.File("usr/bin/git", 0o755, []byte(script)),
		})
		var err error
		if img, err = mutate.AppendLayers(empty.Image, layer); err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf.OS, cf.Architecture = "linux", arch
		cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
		cf.Config.Labels = map[string]string{"org.opencontainers.image.source": "https://example.com/toolchain"}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		base.layers[arch] = []v1.Hash{digest(t, layer)}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	r, err := name.ParseReference(base.ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(archs) == 1 {
		err = remote.Write(r, img)
	} else {
		err = remote.WriteIndex(r, mutate.AppendManifests(empty.Index, adds...))
	}
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// checkOnBase: img is the toolchain base's image for arch with one layer
// more, and files (its flattened /usr/bin/git) hold that base's git.
func checkOnBase(t *testing.T, img v1.Image, files map[string][]byte, base toolchainBase, arch string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	want := base.layers[arch]
	if len(layers) != len(want)+1 {
		t.Fatalf("%s: %d layers, want the base's %d and the binary's", arch, len(layers), len(want))
	}
	for i, l := range want {
		if got := digest(t, layers[i]); got != l {
			t.Errorf("%s: layer %d is %s, want the base's %s", arch, i, got, l)
		}
	}
	if got := string(files["/usr/bin/git"]); got != gitScript(arch) {
		t.Errorf("%s: /usr/bin/git is %q, want the %s base's", arch, got, arch)
	}
}

func digest(t *testing.T, l v1.Layer) v1.Hash {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// chartImage is the reference the chart's bex.image helper renders for
// component with global.imageRegistry prefix and tag: the repository comes
// from the chart's values.
func chartImage(t *testing.T, prefix, component, tag string) name.Reference {
	t.Helper()
	// The section of each component in the chart's values.
	key := map[string]string{
		"bex-controller-manager": "controllerManager",
		"bex-apiserver":          "apiserver",
		"bex-web":                "web",
		"bex-git":                "gitReceiver",
		"bex-build-agent":        "gitReceiver.builds",
		"bex-edge":               "edge",
	}[component]
	var raw json.RawMessage
	readYAML(t, "deploy/chart/bex/values.yaml", &raw)
	for part := range strings.SplitSeq(key, ".") {
		var values map[string]json.RawMessage
		if err := json.Unmarshal(raw, &values); err != nil {
			t.Fatalf("values.yaml: %s: %v", key, err)
		}
		raw = values[part]
	}
	var section struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	if err := json.Unmarshal(raw, &section); err != nil {
		t.Fatalf("values.yaml: %s: %v", key, err)
	}
	repo := section.Image.Repository
	if repo == "" || strings.Contains(repo, "/") {
		t.Fatalf("values.yaml: %s.image.repository is %q; want a repository under global.imageRegistry", key, repo)
	}
	ref, err := name.ParseReference(prefix + "/" + repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// flatten reads the image's filesystem, as a runtime lays its layers, and
// returns the contents of the regular files among paths it has.
func flatten(t *testing.T, img v1.Image, paths ...string) map[string][]byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		p := "/" + strings.TrimPrefix(h.Name, "/")
		if h.Typeflag != tar.TypeReg || !slices.Contains(paths, p) {
			continue
		}
		if files[p], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

// checkBinary: exe is the component's Go binary, an executable for machine,
// built from this module without cgo and with -trimpath.
func checkBinary(t *testing.T, exe []byte, component string, machine elf.Machine, goarch string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil {
		t.Fatalf("%s: not an ELF file: %v", component, err)
	}
	if f.Machine != machine || f.Type != elf.ET_EXEC {
		t.Errorf("%s: ELF %s %s, want %s %s", component, f.Machine, f.Type, machine, elf.ET_EXEC)
	}
	bi, err := buildinfo.Read(bytes.NewReader(exe))
	if err != nil {
		t.Fatalf("%s: no Go build information: %v", component, err)
	}
	if want := "bex.co/bex/cmd/" + component; bi.Path != want {
		t.Errorf("%s: built from %s, want %s", component, bi.Path, want)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": goarch, "-trimpath": "true"} {
		if settings[k] != v {
			t.Errorf("%s: build setting %s=%q, want %q", component, k, settings[k], v)
		}
	}
}

// readYAML reads the module's file at rel into v.
func readYAML(t *testing.T, rel string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// gitHead is the checkout's commit, empty when there is no git history.
func gitHead(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
