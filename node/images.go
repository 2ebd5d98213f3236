package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"

	"bex.co/bex/builder/build"
)

// image is an unpacked image: its root filesystem or its app directory,
// and the config that says how to run it.
type image struct {
	dir    string
	config build.ImageConfig
	// tenant and ref (by digest) say whose and which image it is.
	tenant, ref string

	// users counts the containers made from it and the Pods about to
	// make one; unusedSince is when the last of them went (when it was
	// unpacked, before the first). Both under imageStore.mu.
	users       int
	unusedSince time.Time
}

// imageStore unpacks images once per tenant and image digest: the sandbox
// gives an unpacked root filesystem to one tenant's uids, so tenants never
// share one. Every Pod start resolves its image's reference with the Pod's
// own credentials first, so a Pod without them never runs an image another
// Pod pulled, and a moved tag is unpacked anew.
//
// An image that get hands out is in use until release; collect deletes
// images unused for a while. Each key's lock is held while its image is
// unpacked and while it is deleted, so that a get for it waits and
// unpacks it anew rather than hand out a directory being removed; mu
// guards the maps and the images' users.
type imageStore struct {
	dir      string
	keychain authn.Keychain

	mu      sync.Mutex
	images  map[string]*image
	locks   map[string]*sync.Mutex
	removed int // images collect deleted
}

func newImageStore(dir string, kc authn.Keychain) *imageStore {
	return &imageStore{dir: dir, keychain: kc, images: map[string]*image{}, locks: map[string]*sync.Mutex{}}
}

// get returns the image unpacked for tenant, with the credentials of the
// first of pullSecrets, then the node's, that names its registry. The
// image is in use until the caller releases it.
func (s *imageStore) get(ctx context.Context, tenant, refStr string, pullSecrets []*corev1.Secret) (*image, error) {
	var keychains []authn.Keychain
	for _, sec := range pullSecrets {
		kc, err := dockerConfigKeychain(sec)
		if err != nil {
			return nil, err
		}
		keychains = append(keychains, kc)
	}
	if s.keychain != nil {
		keychains = append(keychains, s.keychain)
	}
	kc := authn.NewMultiKeychain(keychains...)
	ref, err := name.ParseReference(refStr)
	if err != nil {
		return nil, fmt.Errorf("parsing image reference: %w", err)
	}
	desc, err := remote.Head(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc))
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
			return nil, fmt.Errorf("%w (credentials come from the Pod's imagePullSecrets, then the node's --registry-config)", err)
		}
		return nil, err
	}
	byDigest := ref.Context().Digest(desc.Digest.String()).String()

	key := tenant + "\x00" + byDigest
	s.mu.Lock()
	if img, ok := s.images[key]; ok {
		img.users++
		s.mu.Unlock()
		return img, nil
	}
	l, ok := s.locks[key]
	if !ok {
		l = &sync.Mutex{}
		s.locks[key] = l
	}
	s.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	s.mu.Lock()
	img, ok := s.images[key]
	if ok {
		img.users++
	}
	s.mu.Unlock()
	if ok {
		return img, nil
	}
	sum := sha256.Sum256([]byte(key))
	dir := filepath.Join(s.dir, hex.EncodeToString(sum[:16]))
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	cfg, err := build.Unpack(ctx, byDigest, dir, kc)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	img = &image{dir: dir, config: cfg, tenant: tenant, ref: byDigest, users: 1}
	s.mu.Lock()
	s.images[key] = img
	s.mu.Unlock()
	return img, nil
}

// adopt takes over an image an earlier agent unpacked for a container
// this one adopts: it is in use until release, as if get returned it.
func (s *imageStore) adopt(tenant, ref, dir string, cfg build.ImageConfig) *image {
	key := tenant + "\x00" + ref
	s.mu.Lock()
	defer s.mu.Unlock()
	if img, ok := s.images[key]; ok {
		img.users++
		return img
	}
	img := &image{dir: dir, config: cfg, tenant: tenant, ref: ref, users: 1}
	s.images[key] = img
	if s.locks[key] == nil {
		s.locks[key] = &sync.Mutex{}
	}
	return img
}

// release ends a use of img that get or adopt began.
func (s *imageStore) release(img *image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img.users--
	if img.users == 0 {
		img.unusedSince = time.Now()
	}
}

// RegistryConfigKeychain reads the registry credentials of a docker
// config.json file (its "auths"), for Options.Keychain.
func RegistryConfigKeychain(path string) (authn.Keychain, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading registry credentials: %w", err)
	}
	kc, err := configAuths(b)
	if err != nil {
		return nil, fmt.Errorf("registry credentials %s: %w", path, err)
	}
	return kc, nil
}

// dockerConfigKeychain reads a kubernetes.io/dockerconfigjson (or
// dockercfg) Secret as a keychain.
func dockerConfigKeychain(sec *corev1.Secret) (authn.Keychain, error) {
	var kc secretKeychain
	var err error
	switch sec.Type {
	case corev1.SecretTypeDockerConfigJson:
		kc, err = configAuths(sec.Data[corev1.DockerConfigJsonKey])
	case corev1.SecretTypeDockercfg:
		err = json.Unmarshal(sec.Data[corev1.DockerConfigKey], &kc)
	default:
		return nil, fmt.Errorf("image pull secret %s is of type %s, not %s", sec.Name, sec.Type, corev1.SecretTypeDockerConfigJson)
	}
	if err != nil {
		return nil, fmt.Errorf("image pull secret %s: %w", sec.Name, err)
	}
	return kc, nil
}

// configAuths reads the "auths" of a docker config.json.
func configAuths(data []byte) (secretKeychain, error) {
	var cfg struct {
		Auths secretKeychain `json:"auths"`
	}
	err := json.Unmarshal(data, &cfg)
	return cfg.Auths, err
}

type dockerAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

// secretKeychain resolves a registry by its host, as docker's config does
// (an entry may be written as a URL).
type secretKeychain map[string]dockerAuth

func (k secretKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	for host, a := range k {
		h := strings.TrimPrefix(strings.TrimPrefix(host, "https://"), "http://")
		h, _, _ = strings.Cut(h, "/")
		if h != r.RegistryStr() {
			continue
		}
		cfg := authn.AuthConfig{Username: a.Username, Password: a.Password, Auth: a.Auth}
		return authn.FromConfig(cfg), nil
	}
	return authn.Anonymous, nil
}

var _ authn.Keychain = secretKeychain(nil)
