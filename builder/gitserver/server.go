package gitserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-logr/logr"
	"golang.org/x/crypto/ssh"
)

// Principal is who pushed: the tenant a credential belongs to and a
// human-readable actor (a user name, a token name, a key fingerprint) that is
// handed to the Deployer for the audit trail.
type Principal struct {
	Tenant string
	Actor  string
	// PushDenied, when set, says why this principal may fetch but not
	// push (a role that only reads): a push is refused with it, over
	// HTTP (403) and SSH, before anything is received.
	PushDenied string
}

var (
	// ErrUnauthenticated is returned by an Authenticator when a credential is
	// unknown, revoked or malformed. Any other error is treated as an internal
	// failure (HTTP 500, SSH authentication failure) and logged.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrNotFound is returned by Repos.Lookup when the tenant has no app of
	// that name.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable is wrapped by an Authenticator's or Repos' error when
	// what it asks (the platform's database) is out of reach for now. The
	// pusher is told so (HTTP 503 with Retry-After), not "internal error".
	ErrUnavailable = errors.New("unavailable")
)

// Authenticator turns a credential into a Principal.
//
// Rules for implementations:
//   - An unknown, revoked or malformed credential returns an error wrapping
//     ErrUnauthenticated; the receiver then answers HTTP 401 (or refuses the
//     SSH key) and touches nothing on disk.
//   - Any other error is an outage (database down...): it is logged and the
//     client gets a generic failure, never access.
//   - The returned Principal.Tenant must not be empty. The receiver compares it
//     with the tenant in the repository path; the Authenticator does not need
//     to know which repository is asked for.
//   - A credential that may read but not push returns a Principal with
//     PushDenied set to what the pusher should read; the receiver refuses
//     its pushes with it.
//   - The receiver authenticates every HTTP request and every SSH
//     connection anew: a credential revoked meanwhile is refused on the
//     next one.
//   - Methods are called concurrently from many connections and must honour
//     ctx cancellation.
type Authenticator interface {
	// AuthenticatePassword checks HTTP basic credentials; the password is a
	// tenant API token, the username is ignored.
	AuthenticatePassword(ctx context.Context, username, password string) (Principal, error)
	// AuthenticatePublicKey checks an SSH public key registered for a tenant.
	// It is called during the SSH handshake, possibly for several keys the
	// client offers, before the client proves it holds the private key.
	AuthenticatePublicKey(ctx context.Context, key ssh.PublicKey) (Principal, error)
}

// RepoInfo is what the receiver needs to know about an app.
type RepoInfo struct {
	// DeployBranch is the branch whose pushes are built and released, without
	// the refs/heads/ prefix. Empty means "main".
	DeployBranch string
}

// Repos tells the receiver which apps exist.
//
// Rules for implementations:
//   - Lookup returns an error wrapping ErrNotFound when tenant has no app of
//     that name (the same answer for "exists in another tenant"); the receiver
//     then tells the pusher the app does not exist, and creates nothing.
//   - Any other error is an outage: logged, and the client gets a generic
//     failure.
//   - Lookup is called on every request (a deleted app stops accepting pushes
//     at once, a changed deploy branch applies to the next push) and
//     concurrently; it must honour ctx cancellation.
type Repos interface {
	// Lookup returns ErrNotFound when tenant has no app of that name (the
	// same answer for "exists in another tenant").
	Lookup(ctx context.Context, tenant, app string) (RepoInfo, error)
}

// Push describes one update of an app's deploy branch.
type Push struct {
	Tenant string
	App    string
	// Branch is the deploy branch, without refs/heads/.
	Branch string
	// Actor is Principal.Actor of whoever pushed.
	Actor string
	// Old is the commit the branch pointed to before this push, as 40 hex
	// digits: the all-zero hash when the branch is new. It is the
	// repository's real state under the repository lock, which may differ
	// from what the client believed when a concurrent push got in first.
	Old string
	// New is the pushed commit (40 hex digits), already stored in RepoDir.
	New string
	// RepoDir is the path of the bare repository holding New.
	RepoDir string
}

// DeployResult is what a successful Deploy reports to the pusher.
type DeployResult struct {
	Release int
	URL     string
}

// Deployer builds and releases a pushed commit.
//
// Rules for implementations:
//   - Deploy is called with the repository lock held: at most one Deploy runs
//     per repository at a time, and the branch does not move while it runs.
//     Deploys of different repositories run concurrently.
//   - ctx is cancelled when the pusher disconnects or the server shuts down;
//     Deploy should then stop and return an error (the ref is not updated).
//   - Everything written to log is sent to the pusher at once, as git
//     "remote:" lines; write whole lines. log is safe for use by one
//     goroutine at a time; writes after Deploy returns are discarded.
//   - A returned error fails the push: its message is shown to the pusher, the
//     branch is left where it was, and so the previous release keeps serving.
//   - ctx carries the push's steptime.Timeline, holding the receiver's steps
//     (auth, receive, store, refs, and lock wait when there was one): the
//     Deployer adds its own to it, so that the times it reports (the push
//     output's Timings line, the build record) cover the whole push.
type Deployer interface {
	// Deploy builds and releases push.New. It is called after the pushed
	// objects are stored and BEFORE the deploy branch's ref is updated; an
	// error rejects the ref update (the previous release keeps serving).
	// Everything written to log reaches the pusher's terminal while it runs.
	Deploy(ctx context.Context, push Push, log io.Writer) (DeployResult, error)
}

// RefusedError is a Deployer's refusal to build a push at all, such as a
// quota of the tenant's that is reached: the pusher sees "Push rejected:"
// and the reason instead of "Build failed", and the branch does not move.
type RefusedError struct {
	Reason error
}

func (e *RefusedError) Error() string { return e.Reason.Error() }

func (e *RefusedError) Unwrap() error { return e.Reason }

// Quota gives the receiver a tenant's repository size quota.
//
// Rules for implementations: RepoBytes is called once per push that sends
// objects, after the pack is received and before it is stored, and
// concurrently; it returns how many bytes the tenant's repositories may
// take on disk. An error is an outage: the push fails and nothing is
// stored.
type Quota interface {
	RepoBytes(ctx context.Context, tenant string) (int64, error)
}

// DefaultMaxPushBytes is the pack size limit used when Options.MaxPushBytes
// is zero: 200 MiB.
const DefaultMaxPushBytes = 200 << 20

// defaultKeepAlive is how long a deploy may stay silent before the receiver
// sends a keep-alive packet to the client.
const defaultKeepAlive = 5 * time.Second

// Options configure a Server. Root, Auth, Repos and Deployer are required.
type Options struct {
	// Root is the directory holding Root/<tenant>/<app>.git.
	Root     string
	Auth     Authenticator
	Repos    Repos
	Deployer Deployer
	// MaxPushBytes limits the size of one pushed pack; 0 means
	// DefaultMaxPushBytes.
	MaxPushBytes int64
	// Quota, when set, bounds the size of each tenant's repositories,
	// Root/<tenant>: a push whose pack would take them past it is refused
	// and stores nothing.
	Quota Quota
	// SSH bounds SSH connections; zero fields take SSHTimeouts' values.
	SSH SSHLimits
	// Log receives the receiver's own logs; the zero value discards them.
	Log logr.Logger
}

// Server is the git receiver. It serves smart HTTP and SSH for the
// repositories under Options.Root; it is safe for concurrent use. One Server
// must own a Root: the one-writer-per-repository lock is held in memory.
type Server struct {
	root      string
	auth      Authenticator
	repos     Repos
	deployer  Deployer
	maxPush   int64
	quota     Quota
	log       logr.Logger
	keepAlive time.Duration
	ssh       SSHLimits

	mu    sync.Mutex               // guards locks and repository creation
	locks map[string]chan struct{} // repository dir → one-slot semaphore
}

// New returns a Server, or an error when a required option is missing.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Root == "":
		return nil, errors.New("gitserver: Root is required")
	case opts.Auth == nil:
		return nil, errors.New("gitserver: Auth is required")
	case opts.Repos == nil:
		return nil, errors.New("gitserver: Repos is required")
	case opts.Deployer == nil:
		return nil, errors.New("gitserver: Deployer is required")
	case opts.MaxPushBytes < 0:
		return nil, errors.New("gitserver: MaxPushBytes must not be negative")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("resolving root: %w", err)
	}
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, fmt.Errorf("creating root: %w", err)
	}
	s := &Server{
		root:      root,
		auth:      opts.Auth,
		repos:     opts.Repos,
		deployer:  opts.Deployer,
		maxPush:   opts.MaxPushBytes,
		quota:     opts.Quota,
		log:       opts.Log,
		keepAlive: defaultKeepAlive,
		ssh:       opts.SSH.withDefaults(),
		locks:     map[string]chan struct{}{},
	}
	if s.maxPush == 0 {
		s.maxPush = DefaultMaxPushBytes
	}
	if s.log.GetSink() == nil {
		s.log = logr.Discard()
	}
	return s, nil
}

// nameRE is what tenant and app names may look like in a repository path: a
// DNS label, which also keeps paths inside Root.
var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func validName(s string) bool { return nameRE.MatchString(s) }

// RepoDir returns the path of the bare repository of tenant's app. The
// directory exists only once the app has been pushed to or fetched from.
func (s *Server) RepoDir(tenant, app string) string {
	return filepath.Join(s.root, tenant, app+".git")
}

// DeleteRepo removes tenant's app repository. It waits for a push in progress
// to finish. Deleting a repository that does not exist is not an error.
func (s *Server) DeleteRepo(tenant, app string) error {
	if !validName(tenant) || !validName(app) {
		return fmt.Errorf("invalid repository name %q/%q", tenant, app)
	}
	dir := s.RepoDir(tenant, app)
	unlock, err := s.lock(context.Background(), dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing repository: %w", err)
	}
	return nil
}

// semaphore returns the repository's one-slot write lock.
func (s *Server) semaphore(dir string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.locks[dir]
	if !ok {
		ch = make(chan struct{}, 1)
		s.locks[dir] = ch
	}
	return ch
}

// lock takes the repository's write lock, waiting until it is free or ctx is
// done.
func (s *Server) lock(ctx context.Context, dir string) (func(), error) {
	ch := s.semaphore(dir)
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the repository lock: %w", ctx.Err())
	}
}

// tryLock takes the repository's write lock if it is free.
func (s *Server) tryLock(dir string) (func(), bool) {
	ch := s.semaphore(dir)
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, true
	default:
		return nil, false
	}
}

// repo is one authorised repository, opened for a request.
type repo struct {
	tenant, app string
	actor       string
	branch      string // deploy branch
	dir         string
	sto         *filesystem.Storage
}

// openRepo opens (creating it on first use) the bare repository of an app the
// caller has already looked up, and points its HEAD at the deploy branch so
// that clones check it out.
func (s *Server) openRepo(p Principal, app string, info RepoInfo) (*repo, error) {
	branch := info.DeployBranch
	if branch == "" {
		branch = "main"
	}
	dir := s.RepoDir(p.Tenant, app)
	head := plumbing.NewBranchReferenceName(branch)

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
			return nil, fmt.Errorf("creating tenant directory: %w", err)
		}
		_, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
			Bare:        true,
			InitOptions: git.InitOptions{DefaultBranch: head},
		})
		if err != nil {
			return nil, fmt.Errorf("creating repository: %w", err)
		}
		s.log.Info("Created repository", "tenant", p.Tenant, "app", app)
	} else if err != nil {
		return nil, fmt.Errorf("checking repository: %w", err)
	}
	sto := filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault())
	cur, err := sto.Reference(plumbing.HEAD)
	if err != nil && !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil, fmt.Errorf("reading HEAD: %w", err)
	}
	if cur == nil || cur.Type() != plumbing.SymbolicReference || cur.Target() != head {
		if err := sto.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, head)); err != nil {
			return nil, fmt.Errorf("setting HEAD: %w", err)
		}
	}
	return &repo{tenant: p.Tenant, app: app, actor: p.Actor, branch: branch, dir: dir, sto: sto}, nil
}

// reopen replaces the repository's storage with a fresh one, which sees the
// packs other requests have stored since this one was opened.
func (r *repo) reopen() {
	r.sto = filesystem.NewStorage(osfs.New(r.dir), cache.NewObjectLRUDefault())
}
