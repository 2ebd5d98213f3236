package treetar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
)

// Limits bound what Extract writes. Zero fields take the defaults in
// brackets.
type Limits struct {
	// Bytes is the most file content the stream may hold [512 MiB].
	Bytes int64
	// Entries is the most entries it may hold [200,000].
	Entries int
}

// LimitError is the error of a stream past one of its Limits.
type LimitError struct {
	What  string // "bytes" or "entries"
	Limit int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the tree holds more than %d %s, the most a build may leave", e.Limit, e.What)
}

// Write writes the tree under root to w as a tar stream: directories,
// regular files and symbolic links (as links), in the order fs.WalkDir
// reads them, with permission bits and no owner. Other files (sockets,
// pipes, devices) are left out.
func Write(w io.Writer, root *os.Root) error {
	tw := tar.NewWriter(w)
	fsys := root.FS()
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime(), Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
		case d.Type()&fs.ModeSymlink != 0:
			target, err := root.Readlink(name)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case d.Type().IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		default:
			return nil
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := root.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		// A file that grew since it was listed is cut at its listed size.
		_, err = io.Copy(tw, io.LimitReader(f, hdr.Size))
		return err
	})
	if err != nil {
		return fmt.Errorf("writing the tree: %w", err)
	}
	return tw.Close()
}

// Extract writes the tar stream r into root. An entry's name must be a
// local path ("a/b", not "/a" nor "../a"); directories are made as needed;
// a file or link replaces what was at its name, a directory is kept. Hard
// links and special files fail with an error naming the entry.
func Extract(r io.Reader, root *os.Root, lim Limits) error {
	if lim.Bytes == 0 {
		lim.Bytes = 512 << 20
	}
	if lim.Entries == 0 {
		lim.Entries = 200_000
	}
	tr := tar.NewReader(r)
	var bytes int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the tree: %w", err)
		}
		if n >= lim.Entries {
			return &LimitError{What: "entries", Limit: int64(lim.Entries)}
		}
		name := path.Clean(hdr.Name)
		if !fs.ValidPath(name) || name == "." {
			return fmt.Errorf("the tree's entry %q is not a path inside it", hdr.Name)
		}
		perm := fs.FileMode(hdr.Mode) & fs.ModePerm
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := mkdirAll(root, name, perm|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if bytes += hdr.Size; bytes > lim.Bytes {
				return &LimitError{What: "bytes", Limit: lim.Bytes}
			}
			if err := parent(root, name); err != nil {
				return err
			}
			if err := writeFile(root, name, tr, hdr.Size, perm); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := parent(root, name); err != nil {
				return err
			}
			if err := replace(root, name); err != nil {
				return err
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return fmt.Errorf("making the link %s: %w", name, err)
			}
		default:
			return fmt.Errorf("the tree's entry %s is neither a file, a directory nor a symbolic link", name)
		}
	}
}

// mkdirAll makes dir and its parents; an existing directory keeps its
// mode.
func mkdirAll(root *os.Root, dir string, perm fs.FileMode) error {
	if err := root.MkdirAll(dir, perm); err != nil {
		return fmt.Errorf("making the directory %s: %w", dir, err)
	}
	return nil
}

func parent(root *os.Root, name string) error {
	if dir := path.Dir(name); dir != "." {
		return mkdirAll(root, dir, 0o755)
	}
	return nil
}

// replace removes what is at name unless it is a directory (which is
// kept, and then fails the caller's create saying so).
func replace(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("the tree's entry %s would replace a directory", name)
	}
	return root.Remove(name)
}

func writeFile(root *os.Root, name string, r io.Reader, size int64, perm fs.FileMode) error {
	if err := replace(root, name); err != nil {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if _, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	// The umask may have taken bits the tree asks for.
	return root.Chmod(name, perm)
}
