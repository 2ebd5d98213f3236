package build

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// buildDockerfile builds p's Dockerfile with buildkitd at addr through the
// buildctl client, which pushes the image to ref itself. The web process is
// the image's own entrypoint and command unless a Procfile says otherwise.
func (w *workspace) buildDockerfile(ctx context.Context, addr string, p *buildPlan, ref name.Tag) (Result, error) {
	meta := filepath.Join(w.root, "buildctl-metadata.json")
	fmt.Fprintf(w.out, "-----> Building %s with BuildKit at %s\n", p.dockerfile, addr)
	s := step{
		argv: []string{"buildctl", "--addr", addr, "build",
			"--progress", "plain",
			"--frontend", "dockerfile.v0",
			"--local", "context=.",
			"--local", "dockerfile=" + filepath.Dir(filepath.FromSlash(p.dockerfile)),
			"--opt", "filename=" + filepath.Base(p.dockerfile),
			"--output", "type=image,name=" + ref.String() + ",push=true,registry.insecure=true",
			"--metadata-file", meta,
		},
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
		return Result{}, fmt.Errorf("reading the built image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Result{}, fmt.Errorf("reading the built image's config: %w", err)
	}
	defaults := map[string]string{}
	if cmd := append(append([]string(nil), cf.Config.Entrypoint...), cf.Config.Cmd...); len(cmd) > 0 {
		quoted := make([]string, len(cmd))
		for i, c := range cmd {
			quoted[i] = shellQuote(c)
		}
		defaults["web"] = strings.Join(quoted, " ")
	}
	procs, err := processes(w.tree.FS(), defaults)
	if err != nil {
		return Result{}, err
	}
	return Result{Stack: p.stack, Image: digestRef.String(), Digest: md.Digest, Processes: procs}, nil
}
