package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The OCI labels every image carries.
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
)

// User is the user and group the images run as: the chart's runAsUser and
// runAsGroup.
const User = "65532:65532"

// DefaultCABundle is the build host's CA bundle (Debian, Ubuntu, Alpine),
// which the minimal base carries at the same path.
const DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"

// defaultPath is PATH in images laid on the minimal base.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Bases are the images components are laid on, by kind. A nil Static means
// the minimal base Publish makes; Toolchain has no default.
type Bases struct {
	Static, Toolchain name.Reference
}

// Of returns the base of kind b; nil when none is given.
func (bs Bases) Of(b Base) name.Reference {
	switch b {
	case BaseToolchain:
		return bs.Toolchain
	}
	return bs.Static
}

// Options say what Publish builds and where it pushes it.
type Options struct {
	// Root is the root of the bex.co/bex module the components are
	// compiled from.
	Root string
	// Registry prefixes every repository, HOST[:PORT][/PATH]: what the
	// chart's global.imageRegistry names.
	Registry string
	// Tag is every image's tag.
	Tag string
	// Platforms are the platforms built; more than one makes an index.
	Platforms []v1.Platform
	// Components are the images built.
	Components []Component
	// Bases are what the images are laid on.
	Bases Bases
	// CABundle is the PEM file the minimal base carries as
	// /etc/ssl/certs/ca-certificates.crt; DefaultCABundle when empty.
	CABundle string
	// Insecure reaches the registry over plain HTTP.
	Insecure bool
	// Revision and SourceURL are the labels' values; empty leaves the
	// label out.
	Revision, SourceURL string
	// Created is the images' creation time, and the layers' files'
	// modification time (the commit's time makes the images
	// reproducible); zero: 1970.
	Created time.Time
	// Keychain authenticates to registries; nil: authn.DefaultKeychain
	// (the docker config and credential helpers).
	Keychain authn.Keychain
	// Go is the go command; empty: go on PATH.
	Go string
	// Progress gets a line per step; nil discards them.
	Progress io.Writer
}

// Pushed is one image, or index of images, Publish pushed.
type Pushed struct {
	Component string
	Ref       name.Tag
	Digest    v1.Hash
}

// Reference is where a component's image goes: <registry>/<component>:<tag>,
// what the chart's bex.image helper renders for a repository without a
// slash.
func Reference(registry, component, tag string, insecure bool) (name.Tag, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	return name.NewTag(strings.TrimSuffix(registry, "/")+"/"+component+":"+tag, opts...)
}

// Validate checks o before anything is built: every component's base is
// given, the references parse, the CA bundle is readable.
func (o *Options) Validate() error {
	var errs []error
	if err := CheckModuleRoot(o.Root); err != nil {
		errs = append(errs, err)
	}
	if len(o.Platforms) == 0 {
		errs = append(errs, errors.New("no platform to build"))
	}
	if len(o.Components) == 0 {
		errs = append(errs, errors.New("no component to build"))
	}
	for _, c := range o.Components {
		if _, err := Reference(o.Registry, c.Name, o.Tag, o.Insecure); err != nil {
			errs = append(errs, fmt.Errorf("image reference of %s: %w", c.Name, err))
		}
		if c.Base != BaseStatic && o.Bases.Of(c.Base) == nil {
			errs = append(errs, fmt.Errorf("%s needs a base image with %s, and none is given", c.Name, c.Base.Needs()))
		}
	}
	if o.Bases.Static == nil && slices.ContainsFunc(o.Components, func(c Component) bool { return c.Base == BaseStatic }) {
		if _, err := os.Stat(o.caBundle()); err != nil {
			errs = append(errs, fmt.Errorf("the minimal base needs a CA bundle: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (o *Options) caBundle() string {
	if o.CABundle == "" {
		return DefaultCABundle
	}
	return o.CABundle
}

// Publish compiles the components for every platform, lays each binary on
// its base and pushes one image (one platform) or one index (several) per
// component. Bases are pulled and every binary is compiled before the first
// push, so a missing base or a compile error pushes nothing.
func Publish(ctx context.Context, o Options) ([]Pushed, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	goBin := o.Go
	if goBin == "" {
		goBin = "go"
	}
	goBin, err := exec.LookPath(goBin)
	if err != nil {
		return nil, fmt.Errorf("compiling the components needs the go command: %w", err)
	}
	if o.Keychain == nil {
		o.Keychain = authn.DefaultKeychain
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	tmp, err := os.MkdirTemp("", "bex-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	p := &publisher{Options: o, tmp: tmp, remote: []remote.Option{
		remote.WithContext(ctx), remote.WithAuthFromKeychain(o.Keychain), remote.WithUserAgent("bex-images"),
	}}

	bases := map[string]v1.Image{} // by kind and platform
	for _, plat := range o.Platforms {
		for _, c := range o.Components {
			k := baseKey(c.Base, plat)
			if _, ok := bases[k]; ok {
				continue
			}
			if bases[k], err = p.base(c.Base, plat); err != nil {
				return nil, err
			}
		}
	}
	for _, plat := range o.Platforms {
		if err := p.compile(ctx, goBin, plat); err != nil {
			return nil, err
		}
	}
	var pushed []Pushed
	for _, c := range o.Components {
		var imgs []v1.Image
		for _, plat := range o.Platforms {
			img, err := p.image(c, plat, bases[baseKey(c.Base, plat)])
			if err != nil {
				return pushed, fmt.Errorf("assembling %s for %s: %w", c.Name, plat, err)
			}
			imgs = append(imgs, img)
		}
		ps, err := p.push(c, imgs)
		if err != nil {
			return pushed, err
		}
		pushed = append(pushed, ps)
	}
	return pushed, nil
}

type publisher struct {
	Options
	tmp    string
	remote []remote.Option
	// minimalLayer is the minimal base's layer, made once.
	minimalLayer v1.Layer
}

func baseKey(b Base, p v1.Platform) string { return fmt.Sprint(b, " ", p.String()) }

func platformDir(p v1.Platform) string { return strings.ReplaceAll(p.String(), "/", "_") }

// compile builds every component for plat into its own directory, with one
// go build so that shared packages compile once.
func (p *publisher) compile(ctx context.Context, goBin string, plat v1.Platform) error {
	env, err := goEnv(plat)
	if err != nil {
		return err
	}
	var names, pkgs []string
	for _, c := range p.Components {
		names = append(names, c.Name)
		pkgs = append(pkgs, c.Package())
	}
	fmt.Fprintf(p.Progress, "building %s for %s\n", strings.Join(names, ", "), plat)
	start := time.Now()
	dir := filepath.Join(p.tmp, platformDir(plat))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := append([]string{"build", "-trimpath", "-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = p.Root
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("compiling for %s: %w\n%s", plat, err, strings.TrimSpace(string(out)))
	}
	fmt.Fprintf(p.Progress, "built for %s in %s\n", plat, time.Since(start).Round(time.Second))
	return nil
}

// base returns the image components of kind b are laid on for plat.
func (p *publisher) base(b Base, plat v1.Platform) (v1.Image, error) {
	ref := p.Bases.Of(b)
	if ref == nil {
		return p.minimalBase(plat)
	}
	img, err := remote.Image(ref, append(p.remote, remote.WithPlatform(plat))...)
	if err != nil {
		return nil, fmt.Errorf("pulling base %s for %s: %w", ref, plat, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the configuration of base %s: %w", ref, err)
	}
	if cf.OS != plat.OS || cf.Architecture != plat.Architecture || (plat.Variant != "" && cf.Variant != plat.Variant) {
		got := v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
		return nil, fmt.Errorf("base %s is for %s, not %s: name a base (or an index) that has every platform built", ref, got.String(), plat)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("pulling base %s: %w", ref, err)
	}
	fmt.Fprintf(p.Progress, "base %s for %s: %s\n", ref, plat, d)
	return img, nil
}

// minimalBase is an empty image with one layer: the CA bundle, /etc/passwd
// and /etc/group naming user 65532, its home, and /tmp.
func (p *publisher) minimalBase(plat v1.Platform) (v1.Image, error) {
	if p.minimalLayer == nil {
		ca, err := os.ReadFile(p.caBundle())
		if err != nil {
			return nil, fmt.Errorf("reading the CA bundle of the minimal base: %w", err)
		}
		l, err := layer(filepath.Join(p.tmp, "minimal.tar.gz"), types.OCILayer, p.Created, []entry{
			{name: "etc/", mode: 0o755},
			{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
			{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
			{name: "etc/ssl/", mode: 0o755},
			{name: "etc/ssl/certs/", mode: 0o755},
			{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
			{name: "home/", mode: 0o755},
			{name: "home/nonroot/", mode: 0o700, uid: 65532, gid: 65532},
			{name: "tmp/", mode: 0o1777},
		})
		if err != nil {
			return nil, fmt.Errorf("making the minimal base: %w", err)
		}
		p.minimalLayer = l
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.ConfigFile(img, &v1.ConfigFile{
		OS: plat.OS, Architecture: plat.Architecture, Variant: plat.Variant,
		RootFS: v1.RootFS{Type: "layers"},
		Config: v1.Config{Env: []string{defaultPath}},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer: p.minimalLayer, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: p.created()}, CreatedBy: "bex-images: minimal base (CA certificates, /etc/passwd, /tmp)"},
	})
}

func (p *publisher) created() time.Time {
	if p.Created.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return p.Created
}

// image lays c's binary for plat on base, with the entrypoint, user and
// labels the chart expects.
func (p *publisher) image(c Component, plat v1.Platform, base v1.Image) (v1.Image, error) {
	mt, err := base.MediaType()
	if err != nil {
		return nil, err
	}
	layerType := types.OCILayer
	if mt == types.DockerManifestSchema2 {
		layerType = types.DockerLayer // a Docker manifest keeps Docker layers
	}
	bin := filepath.Join(p.tmp, platformDir(plat), c.Name)
	l, err := layer(bin+".tar.gz", layerType, p.Created, []entry{
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: strings.TrimPrefix(c.Binary(), "/"), mode: 0o755, file: bin},
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: l, MediaType: layerType,
		History: v1.History{Created: v1.Time{Time: p.created()}, CreatedBy: "bex-images: " + c.Binary() + " from " + Module + "/cmd/" + c.Name},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = v1.Time{Time: p.created()}
	cf.Config.Entrypoint = []string{c.Binary()}
	cf.Config.Cmd = nil
	cf.Config.User = User
	if len(cf.Config.Env) == 0 {
		cf.Config.Env = []string{defaultPath}
	}
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	for k, v := range map[string]string{LabelVersion: p.Tag, LabelRevision: p.Revision, LabelSource: p.SourceURL} {
		if v != "" {
			cf.Config.Labels[k] = v
		} else {
			delete(cf.Config.Labels, k) // the base's own would lie about this image
		}
	}
	return mutate.ConfigFile(img, cf)
}

// push writes c's image, or an index of its images, to its reference.
func (p *publisher) push(c Component, imgs []v1.Image) (Pushed, error) {
	ref, err := Reference(p.Registry, c.Name, p.Tag, p.Insecure)
	if err != nil {
		return Pushed{}, err
	}
	fmt.Fprintf(p.Progress, "pushing %s\n", ref)
	var d v1.Hash
	if len(imgs) == 1 {
		if err := remote.Write(ref, imgs[0], p.remote...); err != nil {
			return Pushed{}, fmt.Errorf("pushing %s: %w", ref, err)
		}
		if d, err = imgs[0].Digest(); err != nil {
			return Pushed{}, err
		}
	} else {
		idx, err := index(imgs, p.Platforms)
		if err != nil {
			return Pushed{}, fmt.Errorf("making the index of %s: %w", c.Name, err)
		}
		if err := remote.WriteIndex(ref, idx, p.remote...); err != nil {
			return Pushed{}, fmt.Errorf("pushing %s: %w", ref, err)
		}
		if d, err = idx.Digest(); err != nil {
			return Pushed{}, err
		}
	}
	fmt.Fprintf(p.Progress, "pushed %s@%s\n", ref, d)
	return Pushed{Component: c.Name, Ref: ref, Digest: d}, nil
}

// index is an image index of imgs, one per platform; a Docker manifest
// list when the images are Docker manifests.
func index(imgs []v1.Image, plats []v1.Platform) (v1.ImageIndex, error) {
	mt, err := imgs[0].MediaType()
	if err != nil {
		return nil, err
	}
	idxType := types.OCIImageIndex
	if mt == types.DockerManifestSchema2 {
		idxType = types.DockerManifestList
	}
	var adds []mutate.IndexAddendum
	for i, img := range imgs {
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &plats[i]}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, idxType), adds...), nil
}
