package build

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

// ImageConfig is what the process runtime needs to run an unpacked image.
// Paths under /app in the image's config are rewritten to the directory the
// image was unpacked into.
type ImageConfig struct {
	// Digest is the image's manifest digest.
	Digest string
	// Stack and Commit are the image's build labels (empty for images
	// this package did not build).
	Stack  platformv1alpha1.Stack
	Commit string
	// Env is the image's environment as KEY=value, PATH included. The
	// runtime adds its own variables (PORT, the app's config) and may
	// append its own binary directory to PATH (static sites run
	// bex-static).
	Env []string
	// WorkingDir is where processes start: the unpacked directory.
	WorkingDir string
	// Processes maps process types to shell commands.
	Processes map[string]string
	// Cmd is the image's command, the web process for images this package
	// built.
	Cmd []string
}

// Unpack pulls image (best named by digest, as Result.Image is) and
// extracts the files it keeps under /app into dir, which must be missing or
// empty. Of an image laid on a run image it reads only the app's layer (the
// last, named by LabelAppLayer), never the run image's. Extraction stays
// inside dir: entries with ".." or absolute names are refused, symbolic and
// hard links must point inside dir (a chain of links too, checked once the
// tree is complete), and only regular files, directories and
// links are created, with their permission bits (never setuid) and
// modification times. keychains resolve the registry's credentials, the
// first that has some wins (Builder.Keychain gives the platform registry's);
// none means the docker configuration's.
func Unpack(ctx context.Context, image string, dir string, keychains ...authn.Keychain) (ImageConfig, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return ImageConfig{}, fmt.Errorf("parsing image reference: %w", err)
	}
	var kc authn.Keychain = authn.DefaultKeychain
	if len(keychains) > 0 {
		kc = authn.NewMultiKeychain(keychains...)
	}
	img, err := remote.Image(ref, registryOptions(ctx, kc)...)
	if err != nil {
		return ImageConfig{}, fmt.Errorf("pulling %s: %w", image, registryError(err))
	}
	digest, err := img.Digest()
	if err != nil {
		return ImageConfig{}, fmt.Errorf("pulling %s: %w", image, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return ImageConfig{}, fmt.Errorf("reading image config: %w", err)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return ImageConfig{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ImageConfig{}, fmt.Errorf("creating %s: %w", dir, err)
	}
	if entries, err := os.ReadDir(dir); err != nil {
		return ImageConfig{}, err
	} else if len(entries) > 0 {
		return ImageConfig{}, fmt.Errorf("unpacking into %s: directory is not empty", dir)
	}
	layers, err := img.Layers()
	if err != nil {
		return ImageConfig{}, fmt.Errorf("reading layers: %w", err)
	}
	// An image laid on a run image says which layer is the app's: only
	// that one is read, the run image's layers are not even fetched.
	if app := cf.Config.Labels[LabelAppLayer]; app != "" && len(layers) > 1 &&
		len(cf.RootFS.DiffIDs) == len(layers) && cf.RootFS.DiffIDs[len(layers)-1].String() == app {
		layers = layers[len(layers)-1:]
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return ImageConfig{}, err
	}
	defer root.Close()
	x := &extractor{root: root}
	for i, l := range layers {
		if err := ctx.Err(); err != nil {
			return ImageConfig{}, err
		}
		rc, err := l.Uncompressed()
		if err != nil {
			return ImageConfig{}, fmt.Errorf("reading layer %d: %w", i, err)
		}
		err = x.extract(tar.NewReader(rc))
		rc.Close()
		if err != nil {
			return ImageConfig{}, fmt.Errorf("extracting layer %d: %w", i, err)
		}
	}
	if err := x.finish(); err != nil {
		return ImageConfig{}, err
	}

	c := cf.Config
	out := ImageConfig{
		Digest:     digest.String(),
		Stack:      platformv1alpha1.Stack(c.Labels[LabelStack]),
		Commit:     c.Labels[LabelCommit],
		WorkingDir: dir,
		Processes:  map[string]string{},
		Cmd:        c.Cmd,
	}
	if wd := rewriteAppPath(c.WorkingDir, dir); strings.HasPrefix(wd, dir) {
		out.WorkingDir = wd
	}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		elems := strings.Split(v, ":")
		for i, e := range elems {
			elems[i] = rewriteAppPath(e, dir)
		}
		out.Env = append(out.Env, k+"="+strings.Join(elems, ":"))
	}
	for k, v := range c.Labels {
		if t, ok := strings.CutPrefix(k, LabelProcessPrefix); ok {
			out.Processes[t] = v
		}
	}
	return out, nil
}

// rewriteAppPath maps /app and paths under it to dir.
func rewriteAppPath(p, dir string) string {
	if p == AppDir {
		return dir
	}
	if rest, ok := strings.CutPrefix(p, AppDir+"/"); ok {
		return filepath.Join(dir, filepath.FromSlash(rest))
	}
	return p
}

// extractor writes tar entries below root.
type extractor struct {
	root *os.Root
	// dirs get their modes and times once their contents are written.
	dirs map[string]*tar.Header
}

// appRel maps a tar entry's name to a path relative to the app directory;
// ok is false for entries outside /app, which are not extracted.
func appRel(entry string) (rel string, ok bool, err error) {
	n := strings.TrimPrefix(entry, "./")
	if strings.HasPrefix(n, "/") {
		return "", false, fmt.Errorf("entry %q has an absolute name", entry)
	}
	for _, e := range strings.Split(n, "/") {
		if e == ".." {
			return "", false, fmt.Errorf("entry %q leaves the directory", entry)
		}
	}
	n = strings.TrimSuffix(path.Clean(n), "/")
	base := strings.TrimPrefix(AppDir, "/")
	if n == base {
		return ".", true, nil
	}
	rel, ok = strings.CutPrefix(n, base+"/")
	return rel, ok, nil
}

func (x *extractor) extract(tr *tar.Reader) error {
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, ok, err := appRel(hdr.Name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := x.entry(rel, hdr, tr); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
	}
}

func (x *extractor) entry(rel string, hdr *tar.Header, r io.Reader) error {
	base := path.Base(rel)
	if wh, ok := strings.CutPrefix(base, ".wh."); ok {
		// An OCI whiteout deletes what lower layers put there.
		parent := path.Dir(rel)
		if wh == ".wh..opq" {
			entries, err := fs.ReadDir(x.root.FS(), parent)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			for _, e := range entries {
				if err := x.root.RemoveAll(path.Join(parent, e.Name())); err != nil {
					return err
				}
			}
			return nil
		}
		return x.root.RemoveAll(path.Join(parent, wh))
	}
	if rel == "." {
		return nil
	}
	if err := x.root.MkdirAll(path.Dir(rel), 0o755); err != nil {
		return err
	}
	perm := fs.FileMode(hdr.Mode) & fs.ModePerm
	switch hdr.Typeflag {
	case tar.TypeDir:
		if fi, err := x.root.Lstat(rel); err == nil && !fi.IsDir() {
			if err := x.root.Remove(rel); err != nil {
				return err
			}
		}
		if err := x.root.MkdirAll(rel, 0o755); err != nil {
			return err
		}
		if x.dirs == nil {
			x.dirs = map[string]*tar.Header{}
		}
		x.dirs[rel] = hdr
		return nil
	case tar.TypeReg:
		if err := x.replace(rel); err != nil {
			return err
		}
		f, err := x.root.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := x.root.Chmod(rel, perm); err != nil {
			return err
		}
		return x.root.Chtimes(rel, hdr.ModTime, hdr.ModTime)
	case tar.TypeSymlink:
		if !linkTextInside(rel, hdr.Linkname) {
			return fmt.Errorf("symbolic link to %s leaves the directory", hdr.Linkname)
		}
		if err := x.replace(rel); err != nil {
			return err
		}
		return x.root.Symlink(hdr.Linkname, rel)
	case tar.TypeLink:
		target, ok, err := appRel(hdr.Linkname)
		if err != nil || !ok || target == "." {
			return fmt.Errorf("hard link to %s leaves the directory", hdr.Linkname)
		}
		if err := x.replace(rel); err != nil {
			return err
		}
		return x.root.Link(target, rel)
	default:
		return fmt.Errorf("unsupported entry type %q", hdr.Typeflag)
	}
}

// replace removes a non-directory at rel, so a later layer can put
// something else there.
func (x *extractor) replace(rel string) error {
	fi, err := x.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("a directory is in the way")
	}
	return x.root.Remove(rel)
}

// finish refuses a tree with a link that leads outside the directory, then
// applies directory modes and times, deepest first. Links are checked once
// the tree is complete: whether a chain of links leaves depends on links a
// later entry (or a hard link to a link) adds.
func (x *extractor) finish() error {
	if err := checkLinks(x.root); err != nil {
		var le *LinkError
		if errors.As(err, &le) {
			return fmt.Errorf("symbolic link %s leaves the directory", le.Name)
		}
		return err
	}
	names := make([]string, 0, len(x.dirs))
	for n := range x.dirs {
		names = append(names, n)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	for _, n := range names {
		hdr := x.dirs[n]
		if err := x.root.Chmod(n, fs.FileMode(hdr.Mode)&fs.ModePerm|0o700); err != nil {
			return err
		}
		mt := hdr.ModTime
		if mt.IsZero() {
			mt = time.Now()
		}
		if err := x.root.Chtimes(n, mt, mt); err != nil {
			return err
		}
	}
	return nil
}
