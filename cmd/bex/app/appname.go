package app

import (
	"context"
	"os/exec"
	"regexp"
	"strings"

	"bex.co/bex/web/api/apiclient"
)

// gitRemote is the git remote whose URL names the app of a checkout, as
// bex apps create tells to add it.
const gitRemote = "bex"

// appLabel is the form of an app's name.
var appLabel = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// appOf returns the app a command names in args[0], or, when it names
// none, the app of the git checkout in IO.Dir: the last element of the
// URL of its remote named bex (<git base>/<tenant>/<app>.git), as Heroku
// finds an app from its heroku remote.
func (st *state) appOf(ctx context.Context, args []string) (string, error) {
	if len(args) > 0 {
		return args[0], nil
	}
	cmd := exec.CommandContext(ctx, "git", "remote", "get-url", gitRemote)
	cmd.Dir = st.io.Dir
	out, err := cmd.Output()
	if err != nil {
		return "", usagef("which app? give APP, or run bex in a git checkout with a remote named %s (git remote add %s URL, with the git remote bex apps info APP shows)", gitRemote, gitRemote)
	}
	name := appFromRemote(strings.TrimSpace(string(out)))
	if !appLabel.MatchString(name) {
		return "", usagef("which app? the git remote %s, %s, names no app: give APP", gitRemote, strings.TrimSpace(string(out)))
	}
	return name, nil
}

// namedAppClient returns the app a command acts on (appOf) and the API client.
func (st *state) namedAppClient(ctx context.Context, args []string) (string, *apiclient.Client, error) {
	name, err := st.appOf(ctx, args)
	if err != nil {
		return "", nil, err
	}
	c, err := st.needClient()
	return name, c, err
}

// appFromRemote is the app a git remote's URL names: its last path
// element without .git, in a URL (http://git.example.com/acme/shop.git,
// ssh://git@git.example.com:2222/acme/shop.git) or scp-like
// (git@git.example.com:acme/shop.git).
func appFromRemote(u string) string {
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
	if i := strings.LastIndexAny(u, "/:"); i >= 0 {
		u = u[i+1:]
	}
	return u
}
