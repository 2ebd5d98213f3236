package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var (
	// repoPattern is the distribution specification's repository name grammar.
	repoPattern = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)
	// tagPattern is the grammar of a tag.
	tagPattern = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)
	// digestPattern is the grammar of the digests this registry stores.
	digestPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
)

// Username is the user name of the registry's one credential, the token
// being its password (HTTP basic authentication, which go-containerregistry
// clients and docker speak).
const Username = "bex"

// Auth returns the credential that opens a registry whose token is token,
// for go-containerregistry clients (remote.WithAuth, a keychain).
func Auth(token string) authn.Authenticator {
	return &authn.Basic{Username: Username, Password: token}
}

// Registry is an OCI distribution registry whose content is kept in a
// directory. It is safe for concurrent use.
type Registry struct {
	dir     string
	token   []byte
	handler http.Handler

	// mu orders manifest writes and deletes so that what is recorded on
	// disk is what the in-memory index holds.
	mu sync.Mutex
}

// record is one manifest reference as kept on disk.
type record struct {
	Repository  string `json:"repository"`
	Reference   string `json:"reference"`
	ContentType string `json:"contentType"`
	Manifest    []byte `json:"manifest"`
}

// New opens (creating it when missing) the registry kept in dir and loads the
// manifests recorded there. Every request must present token (see Auth);
// it may not be empty.
func New(dir, token string) (*Registry, error) {
	if dir == "" {
		return nil, errors.New("registry directory is required")
	}
	if token == "" {
		return nil, errors.New("registry token is required: every request must present one")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving registry directory: %w", err)
	}
	for _, d := range []string{filepath.Join(dir, "blobs", "sha256"), filepath.Join(dir, "manifests"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("creating registry directory: %w", err)
		}
	}
	r := &Registry{dir: dir, token: []byte(token)}
	r.handler = ggcrregistry.New(
		ggcrregistry.Logger(log.New(io.Discard, "", 0)),
		ggcrregistry.WithBlobHandler(&diskBlobs{dir: filepath.Join(dir, "blobs"), tmp: filepath.Join(dir, "tmp")}),
	)
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// Handler returns the registry's HTTP handler (the /v2/ API).
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(r.serveHTTP)
}

// Serve serves the registry on l until ctx is done, then shuts the server
// down and returns nil. It returns early with the server's error.
func (r *Registry) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving registry: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	<-errc
	return nil
}

// manifestRequest splits /v2/<repo>/manifests/<ref>; ok is false for any
// other path.
func manifestRequest(path string) (repo, ref string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v2/")
	if !found {
		return "", "", false
	}
	i := strings.LastIndex(rest, "/manifests/")
	if i < 0 {
		return "", "", false
	}
	return rest[:i], rest[i+len("/manifests/"):], true
}

// repoOf returns the repository named by a /v2/<repo>/(blobs|manifests|tags)/…
// path, or "" when the path names none.
func repoOf(path string) string {
	rest, found := strings.CutPrefix(path, "/v2/")
	if !found {
		return ""
	}
	for _, sep := range []string{"/manifests/", "/blobs/", "/tags/", "/referrers/"} {
		if i := strings.LastIndex(rest, sep); i >= 0 {
			return rest[:i]
		}
	}
	return ""
}

// authorized reports whether req presents the registry's credential.
func (r *Registry) authorized(req *http.Request) bool {
	user, password, ok := req.BasicAuth()
	userOK := subtle.ConstantTimeCompare([]byte(user), []byte(Username))
	passwordOK := subtle.ConstantTimeCompare([]byte(password), r.token)
	return ok && userOK&passwordOK == 1
}

func (r *Registry) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if !r.authorized(req) {
		w.Header().Set("WWW-Authenticate", `Basic realm="bex registry"`)
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required: the platform registry's token")
		return
	}
	if repo := repoOf(req.URL.Path); repo != "" && !repoPattern.MatchString(repo) {
		writeError(w, http.StatusBadRequest, "NAME_INVALID", "invalid repository name")
		return
	}
	repo, ref, isManifest := manifestRequest(req.URL.Path)
	if !isManifest || (req.Method != http.MethodPut && req.Method != http.MethodDelete) {
		r.handler.ServeHTTP(w, req)
		return
	}
	if !tagPattern.MatchString(ref) && !digestPattern.MatchString(ref) {
		writeError(w, http.StatusBadRequest, "MANIFEST_INVALID", "invalid reference")
		return
	}
	switch req.Method {
	case http.MethodPut:
		r.putManifest(w, req, repo, ref)
	case http.MethodDelete:
		r.deleteManifest(w, req, repo, ref)
	}
}

// maxManifestSize bounds a manifest upload (the distribution spec suggests
// registries accept at least 4 MiB).
const maxManifestSize = 4 << 20

func (r *Registry) putManifest(w http.ResponseWriter, req *http.Request, repo, ref string) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxManifestSize+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "MANIFEST_INVALID", "reading manifest: "+err.Error())
		return
	}
	if len(body) > maxManifestSize {
		writeError(w, http.StatusRequestEntityTooLarge, "MANIFEST_INVALID", "manifest too large")
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))

	r.mu.Lock()
	defer r.mu.Unlock()
	rec := httptest.NewRecorder()
	r.handler.ServeHTTP(rec, req)
	if rec.Code == http.StatusCreated {
		rc := record{Repository: repo, ContentType: req.Header.Get("Content-Type"), Manifest: body}
		digest := rec.Header().Get("Docker-Content-Digest")
		refs := []string{digest}
		if ref != digest {
			refs = append(refs, ref)
		}
		for _, rf := range refs {
			rc.Reference = rf
			if err := r.save(rc); err != nil {
				writeError(w, http.StatusInternalServerError, "UNKNOWN", "recording manifest: "+err.Error())
				return
			}
		}
	}
	copyResponse(w, rec)
}

// deleteManifest deletes repo:ref. A manifest deleted by digest is gone
// whole, as in the distribution registry: the tags that point at it go
// too, and then the blobs no manifest refers to any more (collectBlobs).
func (r *Registry) deleteManifest(w http.ResponseWriter, req *http.Request, repo, ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := httptest.NewRecorder()
	r.handler.ServeHTTP(rec, req)
	if rec.Code == http.StatusAccepted {
		if err := r.forget(repo, ref); err != nil {
			writeError(w, http.StatusInternalServerError, "UNKNOWN", "forgetting manifest: "+err.Error())
			return
		}
		if digestPattern.MatchString(ref) {
			if err := r.untag(repo, ref); err != nil {
				writeError(w, http.StatusInternalServerError, "UNKNOWN", "deleting the manifest's tags: "+err.Error())
				return
			}
			if err := r.collectBlobs(time.Now().Add(-BlobGrace)); err != nil {
				writeError(w, http.StatusInternalServerError, "UNKNOWN", "deleting unreferenced blobs: "+err.Error())
				return
			}
		}
	}
	copyResponse(w, rec)
}

// forget removes the record of repo:ref.
func (r *Registry) forget(repo, ref string) error {
	if err := os.Remove(r.recordPath(repo, ref)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// untag deletes the tags of repo that point at the manifest digest.
func (r *Registry) untag(repo, digest string) error {
	recs, err := r.records(filepath.Join(r.dir, "manifests", filepath.FromSlash(repo), "_refs"))
	if err != nil {
		return err
	}
	for _, rc := range recs {
		if rc.Repository != repo || digestPattern.MatchString(rc.Reference) || digestOf(rc.Manifest) != digest {
			continue
		}
		req := httptest.NewRequest(http.MethodDelete, "/v2/"+repo+"/manifests/"+rc.Reference, nil)
		rec := httptest.NewRecorder()
		r.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted && rec.Code != http.StatusNotFound {
			return fmt.Errorf("deleting tag %s: %d %s", rc.Reference, rec.Code, strings.TrimSpace(rec.Body.String()))
		}
		if err := r.forget(repo, rc.Reference); err != nil {
			return err
		}
	}
	return nil
}

// digestOf is the digest of a manifest's bytes.
func digestOf(manifest []byte) string {
	sum := sha256.Sum256(manifest)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// BlobGrace is how long a blob no manifest refers to is kept after it was
// last written or looked at: a push checks that a blob exists (which marks
// it looked at) before it puts the manifest that refers to it, and a blob
// collected meanwhile would leave that manifest broken.
const BlobGrace = time.Hour

// collectBlobs deletes the blobs that no recorded manifest refers to and
// that were last written or looked at before cutoff. r.mu is held, so no
// manifest is put meanwhile.
func (r *Registry) collectBlobs(cutoff time.Time) error {
	recs, err := r.records(filepath.Join(r.dir, "manifests"))
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, rc := range recs {
		var m struct {
			Config    *struct{ Digest string }  `json:"config"`
			Layers    []struct{ Digest string } `json:"layers"`
			Manifests []struct{ Digest string } `json:"manifests"`
		}
		if err := json.Unmarshal(rc.Manifest, &m); err != nil {
			return fmt.Errorf("reading manifest %s:%s: %w", rc.Repository, rc.Reference, err)
		}
		if m.Config != nil {
			used[m.Config.Digest] = true
		}
		for _, d := range append(m.Layers, m.Manifests...) {
			used[d.Digest] = true
		}
	}
	blobs := filepath.Join(r.dir, "blobs", "sha256")
	entries, err := os.ReadDir(blobs)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if used["sha256:"+e.Name()] {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.ModTime().Before(cutoff) {
			if err := os.Remove(filepath.Join(blobs, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []map[string]string{{"code": code, "message": message}},
	})
}

// recordPath is where the record of repo:ref lives. Names were checked
// against the distribution grammar, which has no "..", no leading "/" and no
// ":" in a repository; a digest's ":" is kept as is.
func (r *Registry) recordPath(repo, ref string) string {
	return filepath.Join(r.dir, "manifests", filepath.FromSlash(repo), "_refs", ref+".json")
}

func (r *Registry) save(rc record) error {
	b, err := json.Marshal(rc)
	if err != nil {
		return err
	}
	path := r.recordPath(rc.Repository, rc.Reference)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(r.dir, "tmp"), path, bytes.NewReader(b))
}

// load replays every recorded manifest into the in-memory index: images
// first, then indexes (which the registry checks against their children),
// each by digest before tags.
func (r *Registry) load() error {
	recs, err := r.records(filepath.Join(r.dir, "manifests"))
	if err != nil {
		return fmt.Errorf("loading manifests: %w", err)
	}
	rank := func(rc record) int {
		n := 0
		if types.MediaType(rc.ContentType).IsIndex() {
			n += 2
		}
		if !digestPattern.MatchString(rc.Reference) {
			n++
		}
		return n
	}
	sort.SliceStable(recs, func(i, j int) bool { return rank(recs[i]) < rank(recs[j]) })
	for _, rc := range recs {
		req := httptest.NewRequest(http.MethodPut, "/v2/"+rc.Repository+"/manifests/"+rc.Reference, bytes.NewReader(rc.Manifest))
		req.Header.Set("Content-Type", rc.ContentType)
		rec := httptest.NewRecorder()
		r.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			return fmt.Errorf("loading manifest %s:%s: %d %s", rc.Repository, rc.Reference, rec.Code, strings.TrimSpace(rec.Body.String()))
		}
	}
	return nil
}

// records reads the manifest records under root; a root that does not
// exist holds none.
func (r *Registry) records(root string) ([]record, error) {
	var recs []record
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == root {
			return fs.SkipAll
		}
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Ext(path) != ".json" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var rc record
		if err := json.Unmarshal(b, &rc); err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		recs = append(recs, rc)
		return nil
	})
	return recs, err
}

// writeAtomic writes what r yields to path through a temporary file in
// tmpDir (on path's file system), so that path either does not exist or is
// complete; a failed read leaves nothing behind.
func writeAtomic(tmpDir, path string, r io.Reader) error {
	f, err := os.CreateTemp(tmpDir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// WriteDockerConfig writes a docker config.json (mode 0600) at path that
// opens the registry at host (host:port) with token, for clients that read
// one (bex-node's --registry-config).
func WriteDockerConfig(path, host, token string) error {
	auth := base64.StdEncoding.EncodeToString([]byte(Username + ":" + token))
	data, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"auth": auth}}})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing registry credentials: %w", err)
	}
	return os.Rename(tmp, path)
}
