package build

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// The checkout is the tenant's: every file of it the builder reads or
// writes itself (stack files, the Procfile, the venv's scripts, the tree it
// packs) goes through an os.Root opened at the checkout, so that no symbolic
// link, nor chain of links, leads the platform outside it. The helpers below
// take the root's fs.FS (root.FS()), which follows links only while they stay
// inside.

// maxStackFile bounds a stack file the builder reads itself (package.json,
// the Procfile, requirements.txt).
const maxStackFile = 1 << 20

// LinkError is the error of a symbolic link in the checkout that leads
// outside it, or whose chain of links never ends: the builder follows
// neither, and the build fails naming the link, never what it points at.
type LinkError struct {
	// Name is the link's path, slash-separated, relative to the checkout.
	Name string
	// Loop is true when the chain of links never ends.
	Loop bool
}

func (e *LinkError) Error() string {
	if e.Loop {
		return fmt.Sprintf("%s is a symbolic link that never resolves (a loop of links); commit the file itself", e.Name)
	}
	return fmt.Sprintf("%s is a symbolic link that leads outside the repository; commit the file itself", e.Name)
}

// isFile reports whether name is a regular file in fsys. A missing file (or
// a link inside fsys to one) is not an error; a link on name's way that
// leads outside fsys is a *LinkError.
func isFile(fsys fs.FS, name string) (bool, error) {
	fi, err := fs.Stat(fsys, name)
	switch {
	case err == nil:
		return fi.Mode().IsRegular(), nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, treeError(fsys, name, err)
	}
}

// anyFile reports whether one of files is a regular file in fsys, as isFile
// does.
func anyFile(fsys fs.FS, files []string) (bool, error) {
	for _, f := range files {
		if ok, err := isFile(fsys, f); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// readFile reads the regular file name of fsys, of at most maxStackFile
// bytes. A missing file is fs.ErrNotExist; a link on name's way that leads
// outside fsys is a *LinkError. No error carries the file's content.
func readFile(fsys fs.FS, name string) ([]byte, error) {
	// Stat first: opening a named pipe a build step left would block.
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, treeError(fsys, name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, treeError(fsys, name, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStackFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(b) > maxStackFile {
		return nil, fmt.Errorf("%s is larger than %d KiB", name, maxStackFile>>10)
	}
	return b, nil
}

// treeError explains err, the error of following name in fsys: a
// *LinkError naming the link on name's way that does not resolve inside
// fsys, else err with its context.
func treeError(fsys fs.FS, name string, err error) error {
	elems := strings.Split(name, "/")
	for i := range elems {
		p := strings.Join(elems[:i+1], "/")
		fi, lerr := fs.Lstat(fsys, p)
		if lerr != nil {
			break
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if _, serr := fs.Stat(fsys, p); serr != nil && !errors.Is(serr, fs.ErrNotExist) {
			return &LinkError{Name: p, Loop: errors.Is(serr, syscall.ELOOP)}
		}
	}
	return fmt.Errorf("reading %s: %w", name, err)
}

// checkLinks refuses a tree that holds a symbolic link leading outside root
// (see linkInside): the build's own steps would read or write through it,
// and the image could not carry it.
func checkLinks(root *os.Root) error {
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return linkInside(root, p)
		}
		return nil
	})
}

// linkInside returns a *LinkError unless the symbolic link at rel
// (slash-separated) stays inside root: its text is relative and does not
// climb above root from the link's directory, and the chain of links it
// starts, followed as the kernel does (by os.Root, which refuses to leave),
// never leaves root. Looking at the text alone is not enough: with a/up ->
// .., the link b -> a/up/.. reads as "a" but leads to root's parent. A link
// whose chain ends at a missing file is inside as long as no step left.
func linkInside(root *os.Root, rel string) error {
	link, err := root.Readlink(rel)
	if err != nil {
		return fmt.Errorf("reading link %s: %w", rel, err)
	}
	if !linkTextInside(rel, link) {
		return &LinkError{Name: rel}
	}
	if _, err := root.Stat(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &LinkError{Name: rel, Loop: errors.Is(err, syscall.ELOOP)}
	}
	return nil
}

// linkTextInside reports whether a symbolic link at rel (slash-separated,
// relative to the root) with target link stays inside the root on its own
// text, before any other link is followed: what can be checked of a link
// before the tree around it exists (an archive's entry).
func linkTextInside(rel, link string) bool {
	if path.IsAbs(link) {
		return false
	}
	target := path.Join(path.Dir(rel), link)
	return target != ".." && !strings.HasPrefix(target, "../")
}
