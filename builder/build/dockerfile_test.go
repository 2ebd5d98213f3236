package build_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/builder/build"
	"bex.co/bex/internal/buildkitd/buildkitdtest"
	"bex.co/bex/internal/sandbox"
)

// dockerfileBuilder is a builder with a buildkitd of its own (runc as its
// worker), pushing to the package's registry.
func dockerfileBuilder(t *testing.T) *build.Builder {
	t.Helper()
	d := buildkitdtest.Start(t)
	return newBuilder(t, func(o *build.Options) { o.BuildKitAddr, o.BuildCtl = d.Addr, d.BuildCtl })
}

// pushBase puts the test tool's base image in the platform registry and
// returns its reference by digest.
func pushBase(t *testing.T) string {
	t.Helper()
	return buildkitdtest.PushBase(t, registryAddr+"/base/tool:"+strings.ToLower(t.Name()), registryAuth)
}

// imageConfig reads the config of the image the registry holds for ref.
func imageConfig(t *testing.T, ref string) (entrypoint, cmd []string, labels map[string]string) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, registryAuth)
	if err != nil {
		t.Fatalf("the built image is not in the registry: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.Labels
}

// A Dockerfile FROM scratch with a static binary copied in: buildkitd
// builds it, the image lands in the registry with its ENTRYPOINT and CMD,
// and Unpack gives back its whole root filesystem with those as the
// command to run.
func TestDockerfileFromScratch(t *testing.T) {
	b := dockerfileBuilder(t)
	tool, err := os.ReadFile(buildkitdtest.Tool(t))
	if err != nil {
		t.Fatal(err)
	}
	res, log, err := buildRepo(t, b, map[string]string{
		"Dockerfile": "FROM scratch\nCOPY --chmod=755 tool /usr/local/bin/tool\nENTRYPOINT [\"/usr/local/bin/tool\"]\nCMD [\"echo\", \"hello from scratch\"]\n",
		"tool":       string(tool),
	}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if res.Stack != platformv1alpha1.StackDockerfile {
		t.Errorf("stack %q, want dockerfile", res.Stack)
	}
	if want := "/usr/local/bin/tool echo 'hello from scratch'"; res.Processes["web"] != want {
		t.Errorf("web process %q, want %q", res.Processes["web"], want)
	}
	if !strings.Contains(log, "Process types -> web") {
		t.Errorf("the log does not list the web process")
	}
	ep, cmd, labels := imageConfig(t, res.Image)
	if !slices.Equal(ep, []string{"/usr/local/bin/tool"}) || !slices.Equal(cmd, []string{"echo", "hello from scratch"}) {
		t.Errorf("image ENTRYPOINT %q CMD %q", ep, cmd)
	}
	if labels[build.LabelStack] != "dockerfile" || labels[build.LabelCommit] == "" {
		t.Errorf("image labels %v lack the stack and commit", labels)
	}

	dir := filepath.Join(t.TempDir(), "rootfs")
	cfg, err := build.Unpack(context.Background(), res.Image, dir, b.Keychain())
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	if !cfg.RootFS || cfg.WorkingDir != "/" || len(cfg.Processes) != 0 {
		t.Errorf("Unpack: RootFS %v, WorkingDir %q, Processes %v; want a root filesystem run from / by its own command", cfg.RootFS, cfg.WorkingDir, cfg.Processes)
	}
	args := cfg.Args()
	if !slices.Equal(args, []string{"/usr/local/bin/tool", "echo", "hello from scratch"}) {
		t.Fatalf("Args %q, want ENTRYPOINT then CMD", args)
	}
	// The unpacked binary is the one copied in: it runs.
	out, err := exec.Command(filepath.Join(dir, args[0]), args[1:]...).Output()
	if err != nil || string(out) != "hello from scratch\n" {
		t.Errorf("the unpacked entrypoint printed %q (%v)", out, err)
	}
}

// A Dockerfile FROM an image in the platform registry: buildkitd pulls it,
// runs a RUN step in runc, and the image keeps the base's environment and
// working directory. The base's file the RUN step removed is gone from the
// unpacked root (a whiteout), and the process label the base image carried
// is not taken for the app's own.
func TestDockerfileFromRegistryImage(t *testing.T) {
	b := dockerfileBuilder(t)
	base := pushBase(t)
	res, log, err := buildRepo(t, b, map[string]string{
		"Dockerfile": "FROM " + base + "\n" +
			"RUN [\"tool\", \"rm\", \"" + buildkitdtest.BaseOldFile + "\"]\n" +
			"COPY page.txt /srv/page.txt\n" +
			"CMD [\"tool\", \"serve\"]\n",
		"page.txt": "hello\n",
	}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if !strings.Contains(log, `RUN ["tool", "rm", "/srv/old.txt"]`) {
		t.Errorf("the log does not show the RUN step")
	}
	ep, cmd, labels := imageConfig(t, res.Image)
	if len(ep) != 0 || !slices.Equal(cmd, []string{"tool", "serve"}) {
		t.Errorf("image ENTRYPOINT %q CMD %q, want CMD [tool serve]", ep, cmd)
	}
	if labels[buildkitdtest.BaseProcessLabel] != buildkitdtest.BaseProcess {
		t.Errorf("the image did not inherit the base's label (labels %v): the test proves nothing", labels)
	}

	dir := filepath.Join(t.TempDir(), "rootfs")
	cfg, err := build.Unpack(context.Background(), res.Image, dir, b.Keychain())
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	if !cfg.RootFS || cfg.WorkingDir != buildkitdtest.BaseWorkDir {
		t.Errorf("Unpack: RootFS %v, WorkingDir %q; want the root filesystem, run from %s", cfg.RootFS, cfg.WorkingDir, buildkitdtest.BaseWorkDir)
	}
	if len(cfg.Processes) != 0 {
		t.Errorf("Unpack took processes %v from the base image's labels", cfg.Processes)
	}
	if !slices.Equal(cfg.Args(), []string{"tool", "serve"}) {
		t.Errorf("Args %q, want [tool serve]", cfg.Args())
	}
	if !slices.Contains(cfg.Env, "PATH=/bin") {
		t.Errorf("Env %q, want the base image's PATH=/bin unchanged", cfg.Env)
	}
	if _, err := os.Lstat(filepath.Join(dir, buildkitdtest.BaseOldFile)); !os.IsNotExist(err) {
		t.Errorf("%s, removed by the RUN step, is in the unpacked root (%v)", buildkitdtest.BaseOldFile, err)
	}
	for _, f := range []string{"srv/page.txt", "bin/tool"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the unpacked root lacks %s: %v", f, err)
		}
	}
}

// A Procfile beside the Dockerfile says what runs: its commands go into the
// image as labels, so the image alone says it.
func TestDockerfileWithProcfile(t *testing.T) {
	b := dockerfileBuilder(t)
	base := pushBase(t)
	res, _, err := buildRepo(t, b, map[string]string{
		"Dockerfile": "FROM " + base + "\nCMD [\"tool\", \"serve\"]\n",
		"Procfile":   "web: tool serve --from-procfile\nworker: tool echo working\n",
	}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	cfg, err := build.Unpack(context.Background(), res.Image, filepath.Join(t.TempDir(), "rootfs"), b.Keychain())
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	want := map[string]string{"web": "tool serve --from-procfile", "worker": "tool echo working"}
	if len(cfg.Processes) != 2 || cfg.Processes["web"] != want["web"] || cfg.Processes["worker"] != want["worker"] {
		t.Errorf("image processes %v, want %v", cfg.Processes, want)
	}
	if res.Processes["web"] != want["web"] {
		t.Errorf("build result's web process %q, want %q", res.Processes["web"], want["web"])
	}
}

// A failing step fails the build; the log keeps the step's output and the
// error names the step.
func TestDockerfileStepFails(t *testing.T) {
	b := dockerfileBuilder(t)
	base := pushBase(t)
	_, log, err := buildRepo(t, b, map[string]string{
		"Dockerfile": "FROM " + base + "\nRUN [\"tool\", \"echo\", \"first step ran\"]\nRUN [\"tool\", \"fail\"]\nCMD [\"tool\", \"serve\"]\n",
	}, nil)
	if err == nil {
		t.Fatal("the build of a failing Dockerfile succeeded")
	}
	for _, want := range []string{"first step ran", "tool fails on purpose", `the Dockerfile step that failed: [3/3] RUN ["tool", "fail"] (Dockerfile:3)`} {
		if !strings.Contains(log, want) {
			t.Errorf("the build log lacks %q", want)
		}
	}
	if !strings.Contains(err.Error(), `RUN ["tool", "fail"]`) {
		t.Errorf("error %q does not name the failing step", err)
	}
}

// A RUN step is tenant code: with a buildkitd on this machine
// (Options.BuildKitLimits), the steps of a build run under the build's
// memory and pids limits, and a step past the memory limit fails the build
// saying so. Without the limits both steps succeed.
func TestDockerfileStepsHaveTheBuildsLimits(t *testing.T) {
	d := buildkitdtest.Start(t)
	b := newBuilder(t, func(o *build.Options) {
		o.BuildKitAddr, o.BuildCtl, o.BuildKitLimits = d.Addr, d.BuildCtl, true
		o.SandboxLimits = sandbox.Limits{Memory: 64 << 20, CPUMilli: 500, Pids: 48}
	})
	base := pushBase(t)
	t.Run("memory", func(t *testing.T) {
		_, log, err := buildRepo(t, b, map[string]string{
			"Dockerfile": "FROM " + base + "\nRUN [\"tool\", \"alloc\", \"256\"]\nCMD [\"tool\", \"serve\"]\n",
		}, nil)
		if err == nil {
			t.Fatalf("a step allocated 256 MiB under a limit of 64 MiB:\n%s", log)
		}
		want := "a step was killed for going past the build's memory limit (64 MiB)"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
		if !strings.Contains(log, "A step was killed for going past the build's memory limit (64 MiB)") {
			t.Errorf("the build log does not say the step went past the memory limit:\n%s", log)
		}
	})
	t.Run("pids", func(t *testing.T) {
		_, log, err := buildRepo(t, b, map[string]string{
			"Dockerfile": "FROM " + base + "\nRUN [\"tool\", \"threads\", \"200\"]\nCMD [\"tool\", \"serve\"]\n",
		}, nil)
		if err == nil {
			t.Fatalf("a step started 200 threads under a limit of 48 pids:\n%s", log)
		}
		if strings.Contains(log, "started 200 threads") {
			t.Errorf("the step started its 200 threads:\n%s", log)
		}
	})
	t.Run("within the limits", func(t *testing.T) {
		if _, log, err := buildRepo(t, b, map[string]string{
			"Dockerfile": "FROM " + base + "\nRUN [\"tool\", \"alloc\", \"16\"]\nCMD [\"tool\", \"serve\"]\n",
		}, nil); err != nil {
			t.Fatalf("a step within the limits failed: %v\n%s", err, log)
		}
	})
	left, _ := filepath.Glob("/sys/fs/cgroup/*/bex-builds/*")
	left2, _ := filepath.Glob("/sys/fs/cgroup/bex-builds/*")
	for _, dir := range append(left, left2...) {
		if strings.HasPrefix(filepath.Base(dir), strconv.Itoa(os.Getpid())+"-") {
			t.Errorf("the build's cgroup %s is left behind", dir)
		}
	}
}

// A RUN step is tenant code: it must not reach the platform's loopback
// services (here the registry), nor anything else, even when it asks for
// the host's network.
func TestDockerfileRunHasNoNetwork(t *testing.T) {
	b := dockerfileBuilder(t)
	base := pushBase(t)
	for _, run := range []string{"RUN", "RUN --network=host"} {
		t.Run(run, func(t *testing.T) {
			_, log, err := buildRepo(t, b, map[string]string{
				"Dockerfile": "FROM " + base + "\n" + run + " [\"tool\", \"dial\", \"" + registryAddr + "\"]\nCMD [\"tool\", \"serve\"]\n",
			}, nil)
			if err == nil || strings.Contains(log, "dial succeeded") {
				t.Fatalf("a step (%s) reached the platform registry at %s (err %v)", run, registryAddr, err)
			}
		})
	}
}

// A "# syntax=" line would hand the build to a frontend image of the
// tenant's choosing, run by buildkitd; the builder uses the built-in
// frontend only. The named image does not exist: were it used, the build
// would fail.
func TestDockerfileSyntaxLineIgnored(t *testing.T) {
	b := dockerfileBuilder(t)
	_, _, err := buildRepo(t, b, map[string]string{
		"Dockerfile": "# syntax=" + registryAddr + "/evil/frontend:1\nFROM scratch\nCOPY page.txt /page.txt\nCMD [\"/nothing\"]\n",
		"page.txt":   "x\n",
	}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
}

// An image with nothing to run and no Procfile fails its build, saying what
// to add.
func TestDockerfileWithoutCommand(t *testing.T) {
	b := dockerfileBuilder(t)
	_, _, err := buildRepo(t, b, map[string]string{
		"Dockerfile": "FROM scratch\nCOPY page.txt /page.txt\n",
		"page.txt":   "x\n",
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "no ENTRYPOINT or CMD") {
		t.Fatalf("err = %v, want the missing command named", err)
	}
}

// Where the platform could not start buildkitd, a Dockerfile push fails
// saying what is missing.
func TestDockerfileWithoutBuildKitSaysWhy(t *testing.T) {
	const reason = "buildkitd runs as root and the platform runs as uid 1000 (start it as root)"
	b := newBuilder(t, func(o *build.Options) { o.NoBuildKitReason = reason })
	_, log, err := buildRepo(t, b, map[string]string{"Dockerfile": "FROM scratch\n"}, nil)
	if err == nil || !strings.Contains(err.Error(), reason) || !strings.Contains(log, "uid 1000") {
		t.Fatalf("err = %v, want the reason in the error and the log", err)
	}
}
