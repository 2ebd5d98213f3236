package build

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// runImage resolves Options.RunImage, the base that built images are laid
// on, to one image of the builder's platform. It is safe for concurrent
// use.
//
// A reference by digest is resolved once per Builder. A tag is checked with
// a HEAD request on every build (registries do not count those as pulls)
// and read again only when it moved. Only manifests and the config are
// read: the base's layers stay in their registry until the push copies (or
// mounts) them into the app's repository.
type runImage struct {
	ref      name.Reference
	platform v1.Platform

	mu sync.Mutex
	// resolved is the digest ref pointed at when img was read: an index's
	// or an image's.
	resolved v1.Hash
	img      v1.Image
	// pinned is img's repository by img's own digest (the platform's
	// image, not the index), what the co.bex.run-image label says.
	pinned name.Digest
}

// runPlatform is the platform taken from a multi-platform run image:
// linux and the builder's architecture, because the app's files (Go
// binaries, native npm modules, pip wheels) are built on the builder's
// machine for it.
func runPlatform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

func newRunImage(ref string) (*runImage, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("run image %q: %w", ref, err)
	}
	return &runImage{ref: r, platform: runPlatform()}, nil
}

// get returns the run image for a build starting now, and its pinned
// reference.
func (r *runImage) get(ctx context.Context, kc authn.Keychain) (v1.Image, name.Digest, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, byDigest := r.ref.(name.Digest); byDigest && r.img != nil {
		return r.img, r.pinned, nil
	}
	opts := append(registryOptions(ctx, kc), remote.WithPlatform(r.platform), remote.WithUserAgent("bex-builder"))
	desc, err := remote.Head(r.ref, opts...)
	if err != nil {
		// A HEAD answer has no body; GET says why (MANIFEST_UNKNOWN, …).
		full, gerr := remote.Get(r.ref, opts...)
		if gerr != nil {
			return nil, name.Digest{}, r.pullError(gerr)
		}
		desc = &full.Descriptor
	}
	if r.img != nil && desc.Digest == r.resolved {
		return r.img, r.pinned, nil
	}
	img, err := remote.Image(r.ref.Context().Digest(desc.Digest.String()), opts...)
	if err != nil {
		return nil, name.Digest{}, r.pullError(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, name.Digest{}, r.pullError(err)
	}
	if cf.OS != r.platform.OS || cf.Architecture != r.platform.Architecture {
		got := v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
		return nil, name.Digest{}, fmt.Errorf("run image %s is for %s, not %s (the builder's platform, which the app's files are built for): name an image, or an index, that has %s",
			r.ref, got.String(), r.platform.String(), r.platform.String())
	}
	d, err := img.Digest()
	if err != nil {
		return nil, name.Digest{}, r.pullError(err)
	}
	r.resolved, r.img, r.pinned = desc.Digest, img, r.ref.Context().Digest(d.String())
	return r.img, r.pinned, nil
}

func (r *runImage) pullError(err error) error {
	return fmt.Errorf("run image %s cannot be pulled: push it, or point the builder's run image (bex-git --run-image) at one it can pull, with credentials in its docker configuration if the registry needs them: %w", r.ref, err)
}

// runEnv is the environment of an image laid on a run image whose
// environment is base: base's variables, with the stack's values replacing
// them, except PATH: the stack's /app entries, then base's PATH (the usual
// Linux PATH when base has none), so that the run image decides where its
// own programs are.
func runEnv(base, stack []string) []string {
	out := make([]string, 0, len(base)+len(stack))
	index := map[string]int{}
	set := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			out[i] = kv
			return
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	basePath := defaultPath
	for _, kv := range base {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok && v != "" {
			basePath = v
		}
		set(kv)
	}
	for _, kv := range stack {
		v, ok := strings.CutPrefix(kv, "PATH=")
		if !ok {
			set(kv)
			continue
		}
		var app []string
		for _, e := range strings.Split(v, ":") {
			if e == AppDir || strings.HasPrefix(e, AppDir+"/") {
				app = append(app, e)
			}
		}
		set("PATH=" + strings.Join(append(app, basePath), ":"))
	}
	return out
}
