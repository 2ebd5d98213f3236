// Package gitserver is bex's git receiver: it accepts `git push` (and serves
// `git clone`/`fetch`) for tenant apps over smart HTTP and SSH, stores bare
// repositories under Root/<tenant>/<app>.git, and hands each push of an app's
// deploy branch to a Deployer while the pusher watches the build stream.
//
// It owns the git wire protocol (v0/v1, as git speaks it for push; fetch
// falls back to it), the repositories on disk, and the rules below. It does
// not know tokens, keys or apps: an Authenticator turns credentials into a
// Principal, Repos says whether an app exists and which branch deploys, and a
// Deployer builds and releases. The wiring (cmd/, cmd/bex-embedded/app) gives it
// the store-backed implementations and mounts HTTPHandler and ServeSSH.
//
// # Access
//
// HTTP uses basic auth with a tenant API token as the password (any user
// name); a missing or wrong token gets 401 with `WWW-Authenticate: Basic
// realm="bex"`, so git asks its credential helper. SSH offers public-key
// authentication only. A credential of tenant A on tenant B's repository gets
// "repository not found" (HTTP 404), exactly like a path that does not exist;
// an app missing from the pusher's own tenant gets "app X does not exist:
// create it with `bex apps create X`". A credential that may read but not
// push (Principal.PushDenied: a viewer's) can clone and fetch; its push is
// refused with HTTP 403 or an SSH protocol error that git prints as it is
// ("push refused: …"). Nothing is created on disk before these checks
// pass; the repository is created on first use after them. Every HTTP
// request and every SSH connection is authenticated anew, so a revoked
// token is refused on the next one.
//
// # Push rules
//
//   - One writer per repository: the pushed pack is received and stored
//     first, then the repository lock is taken (a waiting pusher sees
//     "Another push to X is in progress; waiting…"), and every command is
//     judged against the branch as it is then, not as the client saw it.
//   - Force pushes are accepted, as on Heroku: `git push --force` replaces the
//     branch and deploys. A plain non-fast-forward push is refused by the git
//     client itself, before it sends anything; the server cannot see
//     `--force` in protocol v0, so it checks what it can: when another push
//     moved the branch since the client read it, the update is accepted only
//     if it contains the new tip, otherwise it is refused with
//     `ng <ref> non-fast-forward` ("fetch, merge and push again").
//   - Only branches and tags can be pushed. Only the app's deploy branch
//     builds; a push to another branch updates it and says "Branch X is not
//     the deploy branch (main); nothing to build". The deploy branch cannot be
//     deleted.
//   - The deploy branch's update calls Deployer.Deploy with the lock held,
//     after the objects are stored and before the ref moves. Its log is
//     streamed through git's side-band (band 2) as it is written, so the
//     pusher sees `remote: …` lines live; a keep-alive packet goes out after
//     5 s of silence. Success moves the ref and ends with "Released vN: URL";
//     failure prints the error, leaves the ref (and the running release)
//     untouched and answers `ng refs/heads/main build failed`, so `git push`
//     exits non-zero. A pusher that disconnects cancels the deploy's context;
//     the ref is not updated.
//   - Each push is timed from the start of its receive-pack request or
//     command: the receiver's steps (auth, receive, store, refs, and lock
//     wait when it waited) are in the context the Deployer gets, which
//     adds its own after them and reports them all.
//   - A pack larger than Options.MaxPushBytes (200 MiB by default) is refused
//     with a message naming the limit, and nothing is stored: packs are
//     spooled to a temporary file and added to the repository only once
//     complete and within the limit.
//   - With Options.Quota, a pack that would take the tenant's repositories
//     (Root/<tenant>) past its repository size quota is refused and nothing
//     is stored. A disk (or disk quota) that fills while a pack is stored
//     is said to the pusher in those words: nothing stored, the branch and
//     the running release untouched.
//   - Bodies are bounded as they are read: a push's reference updates to
//     1 MiB, a gzip-compressed push to the pack limit plus 1 MiB once
//     inflated, a fetch request to 16 MiB. A body over its bound before
//     anything is answered gets HTTP 413 naming the limit, and nothing is
//     stored.
//
// # Fetch
//
// Clone and fetch work for the owner. The receiver speaks the plain v0
// upload-pack protocol (no multi-ack, side-band, shallow or partial clone);
// over HTTP it does not negotiate common commits, so a fetch receives
// everything reachable from what it wants — correct, not minimal.
//
// # Operating notes
//
// The lock is in memory: one Server owns a Root. An http.Server serving
// HTTPHandler must not set a WriteTimeout shorter than the longest build;
// HTTPTimeouts are the limits to serve it with. SSH connections are bounded
// by Options.SSH (SSHTimeouts by default): a handshake that takes too long
// or a connection silent for too long is closed. LoadOrCreateHostKey reads
// the SSH host key, creating one on first start.
package gitserver
