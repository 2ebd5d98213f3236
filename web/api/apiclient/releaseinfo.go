package apiclient

import (
	"context"
	"net/http"
	"strconv"
)

// The statuses of a release, as Release.Status says them.
const (
	// ReleaseCurrent: the release serves.
	ReleaseCurrent = "current"
	// ReleaseSuperseded: another release serves; this one can be rolled
	// back to.
	ReleaseSuperseded = "superseded"
	// ReleasePruned: its image and files were deleted past the release
	// retention; it cannot run again.
	ReleasePruned = "pruned"
	// ReleaseFailed: its rollout failed (Release.Failure says why); the
	// release before kept serving. It never runs, pruned or not.
	ReleaseFailed = "failed"
)

// ReleaseInfo answers GET /api/v1/apps/{app}/releases/{release}: one
// release in full. The fields of Release come first, as the release list
// has them.
type ReleaseInfo struct {
	Release
	// Commit is the git commit of the build whose image the release runs;
	// empty when not known.
	Commit string `json:"commit,omitempty"`
	// Stack is how that build built the image: go, node, python,
	// dockerfile, ...
	Stack string `json:"stack,omitempty"`
	// Env lists the variables the release runs with, by name; a value is
	// never shown.
	Env []ReleaseEnvVar `json:"env"`
	// Changes are what the release changed from the one before it.
	Changes ReleaseChanges `json:"changes"`
}

// ReleaseEnvVar is a variable of a release, by name.
type ReleaseEnvVar struct {
	Name string `json:"name"`
	// Secret is true when the value comes from the app's Secret.
	Secret bool `json:"secret,omitempty"`
}

// ReleaseChanges are what a release changed from the release before it,
// by name. A secret is compared by the Secret key it reads, not by its
// value: a new value of a secret under the same name is not among
// Changed, and the release's description names it ("Set API_KEY").
type ReleaseChanges struct {
	// Previous is the release compared with: the newest one before it
	// that went out (failed releases never ran); 0 when there is none,
	// and then its variables are all Added.
	Previous int `json:"previous"`
	// Image is true when the release runs another image than Previous: a
	// new build, or a rollback to another one.
	Image   bool     `json:"image"`
	Added   []string `json:"added"`
	Changed []string `json:"changed"`
	Removed []string `json:"removed"`
}

// GetRelease returns release number of app in full.
func (c *Client) GetRelease(ctx context.Context, app string, number int) (ReleaseInfo, error) {
	var r ReleaseInfo
	return r, c.call(ctx, http.MethodGet, "/apps/"+seg(app)+"/releases/"+strconv.Itoa(number), nil, nil, &r)
}
