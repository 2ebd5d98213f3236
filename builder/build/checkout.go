package build

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"bex.co/bex/internal/bytesize"
)

// DefaultMaxCheckoutBytes is how much a pushed tree may write when checked
// out, unless Options say otherwise: 512 MiB, the order of Heroku's slug
// limit (500 MB). A highly compressible file makes a push of a few KiB
// check out to gigabytes.
const DefaultMaxCheckoutBytes = 512 << 20

// CheckoutTooLargeError fails a build whose tree checks out to more bytes
// than the limit. Nothing of the build has run; the checkout is removed
// with the build's work directory.
type CheckoutTooLargeError struct {
	Limit int64
}

func (e *CheckoutTooLargeError) Error() string {
	return fmt.Sprintf("the pushed tree checks out to more than %s, the limit of a build's checkout: remove large generated or vendored files from the repository",
		bytesize.Format(e.Limit))
}

// checkout writes the tree of commit from the bare repository repo into the
// app directory, without a .git directory, and returns the commit's full
// name. It uses a private index file, so concurrent builds of one
// repository do not disturb each other or the repository.
//
// A tree whose files add up to more than limit bytes is refused before a
// byte is written; the files written are counted again afterwards, since
// the repository's attributes (eol=crlf, working-tree-encoding) may make a
// file larger than its blob.
func (w *workspace) checkout(ctx context.Context, repo, commit string, limit int64) (string, error) {
	if fi, err := os.Stat(repo); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("repository %s not found", repo)
	}
	index := filepath.Join(w.root, "index")
	command := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir=" + repo, "--work-tree=" + w.app}, args...)...)
		cmd.Env = append(w.env(nil), "GIT_INDEX_FILE="+index, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
		return cmd
	}
	git := func(args ...string) (string, error) {
		cmd := command(args...)
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
	if err := treeSize(command("ls-tree", "-r", "-l", "-z", "--full-tree", full), limit); err != nil {
		return "", err
	}
	// One run of git reads the tree into the index and writes its files
	// (the work tree is empty): each process started costs 10 to 20 ms
	// on a busy machine.
	if _, err := git("read-tree", "--reset", "-u", full); err != nil {
		return "", fmt.Errorf("checking out %s: %w", short(full), err)
	}
	if err := dirSize(w.app, limit); err != nil {
		return "", err
	}
	return full, nil
}

// treeSize adds up the sizes of the blobs `git ls-tree -r -l -z` (cmd)
// lists, and returns a *CheckoutTooLargeError as soon as they pass limit.
func treeSize(cmd *exec.Cmd, limit int64) error {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("listing the tree: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("listing the tree: %w", err)
	}
	var total int64
	var over error
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sc.Split(splitNUL)
	for over == nil && sc.Scan() {
		// <mode> SP <type> SP <object> SP+ <size> TAB <path>
		meta, _, _ := strings.Cut(sc.Text(), "\t")
		fields := strings.Fields(meta)
		if len(fields) != 4 || fields[1] != "blob" {
			continue // a submodule's commit: nothing is checked out
		}
		n, err := strconv.ParseInt(fields[3], 10, 64)
		if err != nil {
			continue
		}
		if total += n; total > limit {
			over = &CheckoutTooLargeError{Limit: limit}
		}
	}
	if over != nil {
		_ = cmd.Process.Kill()
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		return over
	}
	if err := sc.Err(); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("listing the tree: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("listing the tree: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func splitNUL(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// dirSize adds up the sizes of the regular files under dir and returns a
// *CheckoutTooLargeError once they pass limit.
func dirSize(dir string, limit int64) error {
	var total int64
	errOver := &CheckoutTooLargeError{Limit: limit}
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if total += fi.Size(); total > limit {
			return errOver
		}
		return nil
	})
	if errors.Is(err, errOver) {
		return errOver
	}
	if err != nil {
		return fmt.Errorf("measuring the checkout: %w", err)
	}
	return nil
}
