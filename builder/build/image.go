package build

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// The image's labels. Process commands are labels so that Unpack (and any
// runtime reading the config) can recover them from the image alone.
const (
	// LabelStack is the stack that built the image.
	LabelStack = "co.bex.stack"
	// LabelCommit is the commit the image was built from.
	LabelCommit = "co.bex.commit"
	// LabelProcessPrefix prefixes one label per process type:
	// co.bex.process.web = "./bin/app".
	LabelProcessPrefix = "co.bex.process."
	// LabelRunImage is the run image the app is laid on, by digest
	// (registry/repository@sha256:…, the image of the builder's platform);
	// absent on images without one.
	LabelRunImage = "co.bex.run-image"
	// LabelAppLayer is the uncompressed digest (diff ID) of the layer that
	// holds /app; Unpack reads only that layer when it is the image's last.
	LabelAppLayer = "co.bex.app-layer"
	// LabelProcessTypes, on a Dockerfile image, lists the process types
	// (comma-separated) whose LabelProcessPrefix labels the builder set
	// from the Procfile; process labels the image inherited from its base
	// do not count. Empty: the image's ENTRYPOINT and CMD are the web
	// process.
	LabelProcessTypes = "co.bex.process-types"
)

// labelDomain starts every label this package sets; a run image's own are
// dropped (a run image built by bex must not lend the app its processes).
const labelDomain = "co.bex."

// AppDir is where an image's files live.
const AppDir = "/app"

// runBase is the run image of one build, resolved.
type runBase struct {
	img v1.Image
	// pinned names img by digest.
	pinned name.Digest
}

// image assembles the app directory into an image: one layer with the files
// under /app, a config with the stack's environment, /app as working
// directory and the web process as command. Without run, the layer is the
// image's only one, on an empty base of the builder's platform; with run,
// it goes on top of the run image's layers, the config is the run image's
// with the stack's environment merged into its own (runEnv), and the OS and
// architecture are the run image's. The layer is zstd-compressed in an OCI
// image (the OCI image spec's tar+zstd: containerd, CRI-O, Docker 23 and
// bex's own Unpack read it), gzipped in a Docker one, whose media types
// have no zstd. It returns the layer's compressed size.
func (w *workspace) image(p *buildPlan, procs map[string]string, run *runBase) (v1.Image, int64, error) {
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	cf := &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           runtime.GOOS,
		RootFS:       v1.RootFS{Type: "layers"},
		Config:       v1.Config{Env: append([]string(nil), p.env...)},
	}
	layerType := types.OCILayerZStd
	if run != nil {
		base = run.img
		mt, err := base.MediaType()
		if err != nil {
			return nil, 0, fmt.Errorf("reading run image %s: %w", run.pinned, err)
		}
		if mt == types.DockerManifestSchema2 {
			layerType = types.DockerLayer // a Docker manifest keeps Docker layers
		}
		rcf, err := base.ConfigFile()
		if err != nil {
			return nil, 0, fmt.Errorf("reading run image %s: %w", run.pinned, err)
		}
		cf = rcf.DeepCopy()
		cf.Created = v1.Time{}
		cf.Config.Env = runEnv(rcf.Config.Env, p.env)
		// The runtime starts processes itself; the run image's own
		// command and health check are not the app's.
		cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.Healthcheck = nil, nil, nil
		for k := range cf.Config.Labels {
			if strings.HasPrefix(k, labelDomain) {
				delete(cf.Config.Labels, k)
			}
		}
	}

	layerPath := filepath.Join(w.root, "layer.tar")
	layer, err := writeLayer(w.tree, layerPath, layerType)
	if err != nil {
		return nil, 0, err
	}
	size, diffID := layer.size, layer.diffID

	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	labels := map[string]string{LabelStack: string(p.stack), LabelCommit: w.commit, LabelAppLayer: diffID.String()}
	if run != nil {
		labels[LabelRunImage] = run.pinned.String()
	}
	for k, v := range procs {
		labels[LabelProcessPrefix+k] = v
	}
	for k, v := range labels {
		cf.Config.Labels[k] = v
	}
	cf.Config.WorkingDir = AppDir
	if web, ok := procs["web"]; ok {
		cf.Config.Cmd = []string{"/bin/sh", "-c", web}
	}
	base, err = mutate.ConfigFile(base, cf)
	if err != nil {
		return nil, 0, fmt.Errorf("writing image config: %w", err)
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer, MediaType: layerType,
		History: v1.History{CreatedBy: "bex build: " + AppDir + " (" + string(p.stack) + " stack, commit " + w.commit + ")"},
	})
	if err != nil {
		return nil, 0, fmt.Errorf("assembling image: %w", err)
	}
	return img, size, nil
}

// writeLayer writes the files of root, under app/, as a tar at dst,
// compressed as mediaType says (zstd for types.OCILayerZStd, else gzip),
// and returns it as a layer of mediaType. Owners are root; modes, symbolic
// links and modification times are kept. A symbolic link that leads
// outside root is refused (linkInside): the image must be complete on its
// own. Files are read through root, so none is read from outside it. Both
// digests are computed as the layer is written, so that nothing reads the
// file again for them before the push.
func writeLayer(root *os.Root, dst string, mediaType types.MediaType) (*fileLayer, error) {
	f, err := os.Create(dst)
	if err != nil {
		return nil, fmt.Errorf("creating layer: %w", err)
	}
	defer f.Close()
	compressed, uncompressed := sha256.New(), sha256.New()
	// gzip writes a few hundred bytes at a time: buffered, the layer is a
	// few hundred writes to the file rather than tens of thousands.
	buf := bufio.NewWriterSize(f, 256<<10)
	zw, err := newCompressor(io.MultiWriter(buf, compressed), mediaType)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(io.MultiWriter(zw, uncompressed))
	base := strings.TrimPrefix(AppDir, "/")
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: base + "/", Mode: 0o755}); err != nil {
		return nil, err
	}
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil || rel == "." {
			return err
		}
		if rel == ".git" && d.IsDir() {
			return filepath.SkipDir
		}
		fi, err := root.Lstat(rel)
		if err != nil {
			return err
		}
		var link string
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if err := linkInside(root, rel); err != nil {
				return err
			}
			if link, err = root.Readlink(rel); err != nil {
				return err
			}
		case fi.Mode().IsRegular(), fi.IsDir():
		default:
			return nil // sockets, pipes and devices have no place in an image
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = base + "/" + rel
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.AccessTime, hdr.ChangeTime = hdr.ModTime, hdr.ModTime
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		src, err := root.Open(rel)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.CopyN(tw, src, hdr.Size)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("writing layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if err := buf.Flush(); err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	l := &fileLayer{
		path: dst, size: fi.Size(), mediaType: mediaType,
		digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(compressed.Sum(nil))},
		diffID: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(uncompressed.Sum(nil))},
	}
	return l, f.Close()
}

// isZstd reports whether a layer of mediaType is zstd-compressed.
func isZstd(mediaType types.MediaType) bool { return mediaType == types.OCILayerZStd }

// newCompressor compresses into w as a layer of mediaType is: zstd at its
// fastest level, or gzip at its (BenchmarkLayerCompression, a 15 MB Go
// binary: zstd writes it in 0.81 of gzip's time, 8% smaller, and it is
// read back in 0.45 of gzip's).
func newCompressor(w io.Writer, mediaType types.MediaType) (io.WriteCloser, error) {
	if isZstd(mediaType) {
		return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest))
	}
	return gzip.NewWriterLevel(w, gzip.BestSpeed)
}

// fileLayer is a compressed tar layer in a file whose digests are known.
type fileLayer struct {
	path           string
	size           int64
	digest, diffID v1.Hash
	mediaType      types.MediaType
}

var _ v1.Layer = (*fileLayer)(nil)

func (l *fileLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *fileLayer) Size() (int64, error)                { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) { return l.mediaType, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

func (l *fileLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	if isZstd(l.mediaType) {
		zr, err := zstd.NewReader(f)
		if err != nil {
			f.Close()
			return nil, err
		}
		return &decompressedFile{ReadCloser: zr.IOReadCloser(), f: f}, nil
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &decompressedFile{ReadCloser: gz, f: f}, nil
}

// decompressedFile closes the file under a decompressing reader with it.
type decompressedFile struct {
	io.ReadCloser
	f *os.File
}

func (d *decompressedFile) Close() error {
	err := d.ReadCloser.Close()
	if ferr := d.f.Close(); err == nil {
		err = ferr
	}
	return err
}

// push writes img to ref and returns its digest.
func push(ctx context.Context, ref name.Tag, img v1.Image, kc authn.Keychain) (string, error) {
	if err := remote.Write(ref, img, registryOptions(ctx, kc)...); err != nil {
		return "", fmt.Errorf("pushing image to %s: %w", ref.RegistryStr(), registryError(err))
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// registryOptions are the options of every request the builder makes to a
// registry (the platform's, and the run image's), with the credentials kc
// resolves: Builder.Keychain's, or, for Unpack without one, those of the
// docker configuration ($DOCKER_CONFIG, else ~/.docker/config.json, and its
// credential helpers), as docker and crane use them.
func registryOptions(ctx context.Context, kc authn.Keychain) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
}

// Keychain is the credentials a process that reads or deletes the platform
// registry's images presents: auth to registry (host[:port]), the docker
// configuration's to any other. It is what Builder.Keychain gives when
// Options.RegistryAuth is set, for processes that have no builder.
func Keychain(registry string, auth authn.Authenticator) authn.Keychain {
	return authn.NewMultiKeychain(registryKeychain{registry: registry, auth: auth}, authn.DefaultKeychain)
}

// registryKeychain gives auth for the registry at host:port registry, and
// nothing (authn.Anonymous) for any other, which the next keychain of a
// multi-keychain then resolves.
type registryKeychain struct {
	registry string
	auth     authn.Authenticator
}

func (k registryKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if r.RegistryStr() == k.registry {
		return k.auth, nil
	}
	return authn.Anonymous, nil
}

// Keychain returns the credentials the builder presents: Options.RegistryAuth
// to the platform registry, the docker configuration's to any other. Unpack
// takes it to pull what the builder pushed.
func (b *Builder) Keychain() authn.Keychain { return b.keychain }

// registryError adds to a refusal for want of credentials where they come
// from.
func registryError(err error) error {
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("%w (the platform registry's credentials are the builder's registry token; any other registry's come from the docker configuration: $DOCKER_CONFIG/config.json, else ~/.docker/config.json)", err)
	}
	return err
}
