package build

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// checkout writes the tree of commit from the bare repository repo into the
// app directory, without a .git directory, and returns the commit's full
// name. It uses a private index file, so concurrent builds of one
// repository do not disturb each other or the repository.
func (w *workspace) checkout(ctx context.Context, repo, commit string) (string, error) {
	if fi, err := os.Stat(repo); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("repository %s not found", repo)
	}
	index := filepath.Join(w.root, "index")
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir=" + repo, "--work-tree=" + w.app}, args...)...)
		cmd.Env = append(w.env(nil), "GIT_INDEX_FILE="+index, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
		var stdout, stderr bytes.Buffer
		cmd.Stdout = &stdout
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(stdout.String()), nil
	}
	full, err := git("rev-parse", "--verify", "--quiet", "--end-of-options", commit+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("commit %s not found in the repository", commit)
	}
	if _, err := git("read-tree", full); err != nil {
		return "", fmt.Errorf("checking out %s: %w", short(full), err)
	}
	if _, err := git("checkout-index", "--all", "--force"); err != nil {
		return "", fmt.Errorf("checking out %s: %w", short(full), err)
	}
	return full, nil
}
