package build

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/buildkitd"
)

// buildDockerfile builds p's Dockerfile with buildkitd at addr through the
// buildctl client, which pushes the image to ref itself. The web process is
// the image's own entrypoint and command unless a Procfile says otherwise:
// the Procfile's processes go into the image as labels (LabelProcessTypes
// says which), so the image alone says what runs.
//
// The tenant's Dockerfile is tenant code. Every RUN step gets a network
// namespace of its own with only a loopback interface
// (force-network-mode=none): it reaches neither the platform's loopback
// services nor the outside. The Dockerfile frontend built into buildkitd is
// the only one used: a "# syntax=" line, which would hand the build to a
// frontend image of the tenant's choosing, is ignored (cmdline set). No
// entitlement (network.host, security.insecure) is asked for, and buildkitd
// grants none.
func (w *workspace) buildDockerfile(ctx context.Context, buildctl, addr string, p *buildPlan, ref name.Tag) (_ Result, err error) {
	procfile, err := w.procfile()
	if err != nil {
		return Result{}, err
	}
	types := slices.Sorted(func(yield func(string) bool) {
		for t := range procfile {
			if !yield(t) {
				return
			}
		}
	})
	meta := filepath.Join(w.root, "buildctl-metadata.json")
	fmt.Fprintf(w.out, "-----> Building %s with BuildKit\n", p.dockerfile)
	argv := []string{buildctl, "--addr", addr, "build",
		"--progress", "plain",
		"--frontend", "dockerfile.v0",
		"--local", "context=.",
		"--local", "dockerfile=" + filepath.Dir(filepath.FromSlash(p.dockerfile)),
		"--opt", "filename=" + filepath.Base(p.dockerfile),
		"--opt", "cmdline=dockerfile.v0",
		"--opt", "force-network-mode=none",
		"--opt", "label:" + LabelStack + "=" + string(platformv1alpha1.StackDockerfile),
		"--opt", "label:" + LabelCommit + "=" + w.commit,
		"--opt", "label:" + LabelProcessTypes + "=" + strings.Join(types, ","),
	}
	for _, t := range types {
		argv = append(argv, "--opt", "label:"+LabelProcessPrefix+t+"="+procfile[t])
	}
	if w.bkLimits {
		cg, cgErr := buildkitd.NewCgroup(cgroupName(), buildkitd.StepLimits{
			Memory: w.sbLimits.Memory, CPUMilli: w.sbLimits.CPUMilli, Pids: w.sbLimits.Pids,
		})
		if cgErr != nil {
			return Result{}, cgErr
		}
		argv = append(argv, "--opt", "cgroup-parent="+cg.Parent())
		defer func() {
			var ce *CommandError
			// A step killed by SIGKILL (137) once the limit was reached;
			// read before the cgroup goes.
			if errors.As(err, &ce) && cg.MemoryLimitReached() && strings.Contains(ce.Tail, "exit code: 137") {
				msg := fmt.Sprintf("a step was killed for going past the build's memory limit (%d MiB)", w.sbLimits.Memory>>20)
				ce.Hint = strings.TrimPrefix(ce.Hint+"; "+msg, "; ")
				fmt.Fprintf(w.out, "-----> %s\n", strings.ToUpper(msg[:1])+msg[1:])
			}
			if rmErr := cg.Remove(); rmErr != nil {
				fmt.Fprintf(w.out, "-----> %v\n", rmErr)
			}
		}()
	}
	argv = append(argv,
		"--output", "type=image,name="+ref.String()+",push=true,registry.insecure=true",
		"--metadata-file", meta,
	)
	s := step{argv: argv, display: "BuildKit build of " + p.dockerfile, hint: failedDockerfileStep, onHost: true}
	dockerConfig, err := w.pushConfig(ref.Context())
	if err != nil {
		return Result{}, err
	}
	if dockerConfig != "" {
		s.env = append(s.env, "DOCKER_CONFIG="+dockerConfig)
	}
	if err := w.run(ctx, w.app, s); err != nil {
		return Result{}, w.ctxErr(ctx, err)
	}
	b, err := os.ReadFile(meta)
	if err != nil {
		return Result{}, fmt.Errorf("reading buildctl metadata: %w", err)
	}
	var md struct {
		Digest string `json:"containerimage.digest"`
	}
	if err := json.Unmarshal(b, &md); err != nil || md.Digest == "" {
		return Result{}, fmt.Errorf("buildctl metadata has no image digest: %s", b)
	}
	digestRef := ref.Context().Digest(md.Digest)
	img, err := remote.Image(digestRef, registryOptions(ctx, w.keychain)...)
	if err != nil {
		return Result{}, fmt.Errorf("reading the built image: %w", registryError(err))
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Result{}, fmt.Errorf("reading the built image's config: %w", err)
	}
	procs := procfile
	if len(procs) == 0 {
		args := ImageConfig{Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd}.Args()
		if len(args) == 0 {
			return Result{}, fmt.Errorf("the image of %s has no ENTRYPOINT or CMD and the repository has no Procfile: say what the web process runs, with CMD [\"/path/to/server\"] in the Dockerfile or a Procfile line \"web: <command>\"", p.dockerfile)
		}
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = shellQuote(a)
		}
		procs = map[string]string{"web": strings.Join(quoted, " ")}
	}
	fmt.Fprintf(w.out, "-----> Discovering process types\n       %s\n", describeProcesses(procs))
	return Result{Stack: p.stack, Image: digestRef.String(), Digest: md.Digest, Processes: procs}, nil
}

// pushConfig writes, outside the build context, a docker configuration
// with the credentials the builder holds for repo's registry, for buildctl
// to push with; "" when it holds none.
func (w *workspace) pushConfig(repo name.Repository) (string, error) {
	auth, err := w.keychain.Resolve(repo)
	if err != nil {
		return "", fmt.Errorf("resolving the credentials of %s: %w", repo.RegistryStr(), err)
	}
	cfg, err := auth.Authorization()
	if err != nil {
		return "", fmt.Errorf("reading the credentials of %s: %w", repo.RegistryStr(), err)
	}
	if cfg.Username == "" && cfg.Password == "" && cfg.Auth == "" {
		return "", nil
	}
	entry := map[string]string{"auth": cfg.Auth}
	if cfg.Auth == "" {
		entry["auth"] = base64.StdEncoding.EncodeToString([]byte(cfg.Username + ":" + cfg.Password))
	}
	b, err := json.Marshal(map[string]any{"auths": map[string]any{repo.RegistryStr(): entry}})
	if err != nil {
		return "", err
	}
	dir := filepath.Join(w.root, "docker-config")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
}

// procfile returns the checkout's Procfile processes, none when it has no
// Procfile.
func (w *workspace) procfile() (map[string]string, error) {
	if _, err := w.tree.Lstat("Procfile"); errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	return processes(w.tree.FS(), nil)
}

// cgroupSeq numbers the builds' cgroups within this process.
var cgroupSeq atomic.Uint64

// cgroupName names a Dockerfile build's cgroup: unique on the machine
// while this process lives (its pid) and within it.
func cgroupName() string {
	return fmt.Sprintf("%d-%d", os.Getpid(), cgroupSeq.Add(1))
}

// failedStep matches the line of buildctl's error report that names the
// Dockerfile step that failed (" > [2/3] RUN make:"), failedFileLine the
// Dockerfile line it came from ("Dockerfile:3"), and failedSolve buildctl's
// last word ("error: failed to solve: …").
var (
	failedStep     = regexp.MustCompile(`(?m)^ > (\[[^\]]*\] .*?):?\s*$`)
	failedFileLine = regexp.MustCompile(`(?m)^([^\s:]+:\d+)\s*$`)
	failedSolve    = regexp.MustCompile(`(?m)^error: (.*\S)\s*$`)
)

// failedDockerfileStep names the failing step from the end of buildctl's
// output, or, when no step failed (a refused build), what BuildKit said.
func failedDockerfileStep(tail string) string {
	m := failedStep.FindAllStringSubmatch(tail, -1)
	if len(m) == 0 {
		if e := failedSolve.FindAllStringSubmatch(tail, -1); len(e) > 0 {
			return "BuildKit: " + e[len(e)-1][1]
		}
		return ""
	}
	hint := "the Dockerfile step that failed: " + m[len(m)-1][1]
	if l := failedFileLine.FindAllStringSubmatch(tail, -1); len(l) > 0 {
		hint += " (" + l[len(l)-1][1] + ")"
	}
	return hint
}
