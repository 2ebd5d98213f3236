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
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

// ImageConfig is what a runtime needs to run an unpacked image. For an
// image unpacked as its app directory, paths under /app in the image's
// config are rewritten to the directory the image was unpacked into; for a
// root filesystem they are the image's own.
type ImageConfig struct {
	// Digest is the image's manifest digest.
	Digest string
	// Stack and Commit are the image's build labels (empty for images
	// this package did not build).
	Stack  platformv1alpha1.Stack
	Commit string
	// RootFS is true when the directory holds the image's whole root
	// filesystem (see Unpack), false when it holds the image's /app.
	RootFS bool
	// Env is the image's environment as KEY=value, PATH included. The
	// runtime adds its own variables (PORT, the app's config) and may
	// append its own binary directory to PATH (static sites run
	// bex-static).
	Env []string
	// WorkingDir is where processes start: for an app directory, the
	// unpacked directory (or the image's working directory under it); for
	// a root filesystem, the image's working directory inside it ("/"
	// when the image names none).
	WorkingDir string
	// Processes maps process types to shell commands.
	Processes map[string]string
	// Entrypoint and Cmd are the image's own; Cmd is the web process for
	// images this package built, and Entrypoint followed by Cmd is the one
	// of a Dockerfile image without a Procfile.
	Entrypoint, Cmd []string
}

// Args is the image's ENTRYPOINT followed by its CMD, as a container runs
// them (exec form, no shell); nil when the image has neither.
func (c ImageConfig) Args() []string {
	if len(c.Entrypoint)+len(c.Cmd) == 0 {
		return nil
	}
	return append(append([]string(nil), c.Entrypoint...), c.Cmd...)
}

// Unpack pulls image (best named by digest, as Result.Image is) and
// extracts it into dir, which must be missing or empty. keychains resolve
// the registry's credentials, the first that has some wins
// (Builder.Keychain gives the platform registry's); none means the docker
// configuration's.
//
// An image this package built for one of its stacks (labelled with its
// stack, other than dockerfile) is unpacked as its app directory: only the
// files it keeps under /app land in dir, and of an image laid on a run
// image only the app's layer (the last, named by LabelAppLayer) is read,
// never the run image's. Any other image (a Dockerfile build, an image from
// elsewhere) brings its own root filesystem and is unpacked whole: every
// layer in order, whiteouts honoured, with the result's RootFS set.
//
// Extraction stays inside dir: entries with ".." or absolute names are
// refused, hard links must point inside dir, nothing is ever written
// through a symbolic link that leads out of dir, and only regular files,
// directories and links are created, with their permission bits (never
// setuid or setgid) and modification times, owned by the caller. An app
// directory's symbolic links must point inside it (a chain of links too,
// checked once the tree is complete); a root filesystem's may be absolute
// (they resolve inside the container's root), and its device nodes and
// FIFOs are skipped (the container runtime makes /dev).
func Unpack(ctx context.Context, image string, dir string, keychains ...authn.Keychain) (ImageConfig, error) {
	img, digest, cf, err := fetch(ctx, image, keychains)
	if err != nil {
		return ImageConfig{}, err
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
	stack := platformv1alpha1.Stack(cf.Config.Labels[LabelStack])
	rootFS := stack == "" || stack == platformv1alpha1.StackDockerfile
	// An image laid on a run image says which layer is the app's: only
	// that one is read, the run image's layers are not even fetched.
	if app := cf.Config.Labels[LabelAppLayer]; !rootFS && app != "" && len(layers) > 1 &&
		len(cf.RootFS.DiffIDs) == len(layers) && cf.RootFS.DiffIDs[len(layers)-1].String() == app {
		layers = layers[len(layers)-1:]
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return ImageConfig{}, err
	}
	defer root.Close()
	x := &extractor{root: root, rootFS: rootFS}
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
	return unpackedConfig(digest.String(), cf, dir), nil
}

// InspectUnpacked reads image's configuration as Unpack returned it when
// it unpacked image into dir, without unpacking it again: for a restart
// of a release whose directory is in use. keychains are as for Unpack.
func InspectUnpacked(ctx context.Context, image string, dir string, keychains ...authn.Keychain) (ImageConfig, error) {
	_, digest, cf, err := fetch(ctx, image, keychains)
	if err != nil {
		return ImageConfig{}, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return ImageConfig{}, err
	}
	return unpackedConfig(digest.String(), cf, dir), nil
}

// unpackedConfig is the configuration of an image unpacked into dir: an
// image laid out under /app has its paths mapped to dir.
func unpackedConfig(digest string, cf *v1.ConfigFile, dir string) ImageConfig {
	c := cf.Config
	out := imageConfig(digest, cf)
	if out.RootFS {
		return out
	}
	out.WorkingDir, out.Env = dir, nil
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
	return out
}

// Inspect reads image's configuration without unpacking it, for a runtime
// that runs the image itself (a cluster pulls it): WorkingDir and Env are
// the image's own, with its own paths. keychains are as for Unpack.
func Inspect(ctx context.Context, image string, keychains ...authn.Keychain) (ImageConfig, error) {
	_, digest, cf, err := fetch(ctx, image, keychains)
	if err != nil {
		return ImageConfig{}, err
	}
	return imageConfig(digest.String(), cf), nil
}

// fetch reads image's manifest and config from its registry, with the
// credentials of the first of keychains that has some (none: the docker
// configuration's); layers are read when the image's are.
func fetch(ctx context.Context, image string, keychains []authn.Keychain) (v1.Image, v1.Hash, *v1.ConfigFile, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, v1.Hash{}, nil, fmt.Errorf("parsing image reference: %w", err)
	}
	var kc authn.Keychain = authn.DefaultKeychain
	if len(keychains) > 0 {
		kc = authn.NewMultiKeychain(keychains...)
	}
	img, err := remote.Image(ref, registryOptions(ctx, kc)...)
	if err != nil {
		return nil, v1.Hash{}, nil, fmt.Errorf("pulling %s: %w", image, registryError(err))
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, v1.Hash{}, nil, fmt.Errorf("pulling %s: %w", image, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, v1.Hash{}, nil, fmt.Errorf("reading image config: %w", err)
	}
	return img, digest, cf, nil
}

// imageConfig is the ImageConfig of an image as it is, its paths its own.
func imageConfig(digest string, cf *v1.ConfigFile) ImageConfig {
	c := cf.Config
	stack := platformv1alpha1.Stack(c.Labels[LabelStack])
	rootFS := stack == "" || stack == platformv1alpha1.StackDockerfile
	return ImageConfig{
		Digest:     digest,
		Stack:      stack,
		Commit:     c.Labels[LabelCommit],
		RootFS:     rootFS,
		WorkingDir: path.Clean("/" + c.WorkingDir),
		Env:        append([]string(nil), c.Env...),
		Processes:  imageProcesses(c.Labels, rootFS),
		Entrypoint: c.Entrypoint,
		Cmd:        c.Cmd,
	}
}

// imageProcesses reads the process labels. A Dockerfile image may inherit
// process labels from its base image (one bex built, say); only those the
// builder named in LabelProcessTypes are its own, so only they count.
func imageProcesses(labels map[string]string, rootFS bool) map[string]string {
	out := map[string]string{}
	if rootFS {
		for _, t := range strings.Split(labels[LabelProcessTypes], ",") {
			if cmd := labels[LabelProcessPrefix+t]; t != "" && cmd != "" {
				out[t] = cmd
			}
		}
		return out
	}
	for k, v := range labels {
		if t, ok := strings.CutPrefix(k, LabelProcessPrefix); ok {
			out[t] = v
		}
	}
	return out
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

// extractor writes tar entries below root: an image's /app, or with rootFS
// its whole root filesystem.
type extractor struct {
	root   *os.Root
	rootFS bool
	// dirs get their modes and times once their contents are written.
	dirs map[string]*tar.Header
}

// rel maps a tar entry's name to a path relative to the directory being
// written; ok is false for entries outside it (outside /app, unless the
// whole root filesystem is extracted), which are not extracted.
func (x *extractor) rel(entry string) (rel string, ok bool, err error) {
	n, err := cleanEntry(entry)
	if err != nil {
		return "", false, err
	}
	if x.rootFS {
		return n, true, nil
	}
	base := strings.TrimPrefix(AppDir, "/")
	if n == base {
		return ".", true, nil
	}
	rel, ok = strings.CutPrefix(n, base+"/")
	return rel, ok, nil
}

// cleanEntry checks a tar entry's name and returns it cleaned, relative to
// the archive's root ("." for the root itself).
func cleanEntry(entry string) (string, error) {
	n := strings.TrimPrefix(entry, "./")
	if strings.HasPrefix(n, "/") {
		return "", fmt.Errorf("entry %q has an absolute name", entry)
	}
	for _, e := range strings.Split(n, "/") {
		if e == ".." {
			return "", fmt.Errorf("entry %q leaves the directory", entry)
		}
	}
	return strings.TrimSuffix(path.Clean(n), "/"), nil
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
		rel, ok, err := x.rel(hdr.Name)
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
		// A root filesystem's links resolve inside the container's root,
		// absolute ones included; the Root refuses to write through one
		// that leads out of the directory.
		if !x.rootFS && !linkTextInside(rel, hdr.Linkname) {
			return fmt.Errorf("symbolic link to %s leaves the directory", hdr.Linkname)
		}
		if err := x.replace(rel); err != nil {
			return err
		}
		return x.root.Symlink(hdr.Linkname, rel)
	case tar.TypeLink:
		target, ok, err := x.rel(hdr.Linkname)
		if err != nil || !ok || target == "." {
			return fmt.Errorf("hard link to %s leaves the directory", hdr.Linkname)
		}
		if err := x.replace(rel); err != nil {
			return err
		}
		return x.root.Link(target, rel)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		if x.rootFS {
			return nil
		}
		return fmt.Errorf("unsupported entry type %q", hdr.Typeflag)
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
	// A root filesystem's links resolve inside the container's root,
	// wherever they point; an app directory's must stay inside it.
	if err := checkLinks(x.root); err != nil && !x.rootFS {
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
