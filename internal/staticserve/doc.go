// Package staticserve is the web process of static sites: a small file
// server that cmd/bex-static runs in an app's directory on $PORT. The builder
// names it as the static stack's web command; the process runtime finds the
// bex-static binary next to the platform's own binaries.
//
// It serves the directory's files as they are, "/" and directories from
// their index.html, answers a missing file with the site's 404.html when it
// has one, and never serves dotfiles (.env, .git) except under /.well-known/.
// The directory is opened as an os.Root: a symbolic link (or a chain of
// links) that leads outside it answers 404; links inside it are followed.
package staticserve
