package pipeline_test

import (
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"bex.co/bex/builder/gitaccess"
	"bex.co/bex/builder/gitserver"
	"bex.co/bex/internal/steptime"
	"bex.co/bex/test/platformtest"
)

// A push with the real git through the git receiver is timed from its
// receive-pack request: the receiver's steps come first in the push
// output's Timings line and in the build record, before the pipeline's.
func TestPushTimesTheReceiveFirst(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	secret, _, err := e.st.CreateToken(ctx, mustTenantID(t, e.st, e.tenant), "", "push")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gitserver.New(gitserver.Options{
		Root: filepath.Join(t.TempDir(), "repos"), Auth: gitaccess.Auth{Store: e.st}, Repos: gitaccess.Repos{Kube: e.kube}, Deployer: e.a,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(hs.Close)
	remote, err := url.Parse(hs.URL + "/" + e.tenant + "/" + e.name + ".git")
	if err != nil {
		t.Fatal(err)
	}
	remote.User = url.UserPassword("git", secret)

	platformtest.WriteNodeApp(t, e.repo, "v1", "")
	platformtest.Git(t, e.repo, "add", ".")
	platformtest.Git(t, e.repo, "commit", "-q", "-m", "v1")
	out := platformtest.Git(t, e.repo, "push", remote.String(), "main")

	receiver := []string{"auth", "receive", "store", "refs"}
	// The pipeline's first step, and one of the build's.
	pipeline := []string{"prepare", "checkout"}
	var line string
	for _, l := range strings.Split(out, "\n") {
		if _, list, ok := strings.Cut(l, "remote: -----> Timings: "); ok {
			line = strings.TrimSpace(list) // git pads remote lines
		}
	}
	var printed []string
	for _, part := range strings.Split(line, ", ") {
		if i := strings.LastIndexByte(part, ' '); i > 0 {
			printed = append(printed, part[:i])
		}
	}
	if !slices.Equal(firstSteps(printed, len(receiver)+len(pipeline)), append(receiver, pipeline...)) {
		t.Errorf("the push's Timings line is %q, want it to start with %q then %q; push output:\n%s", line, receiver, pipeline, out)
	}

	bs, err := e.st.ListBuilds(ctx, mustTenantID(t, e.st, e.tenant), e.name, 10)
	if err != nil || len(bs) != 1 {
		t.Fatalf("builds %v, %v; want one", bs, err)
	}
	var recorded []string
	for _, st := range bs[0].Timings {
		recorded = append(recorded, st.Name)
		if st.Seconds < 0 {
			t.Errorf("the build record's step %s took %fs", st.Name, st.Seconds)
		}
	}
	if !slices.Equal(firstSteps(recorded, len(receiver)+len(pipeline)), append(receiver, pipeline...)) {
		t.Errorf("the build record's timings are %q, want them to start with %q then %q", recorded, receiver, pipeline)
	}
	if got := steptime.Format(bs[0].Timings); got != line {
		t.Errorf("the build record's timings read %q, the push's line %q", got, line)
	}
}

// firstSteps returns the first n of names, or all of them when fewer.
func firstSteps(names []string, n int) []string {
	return names[:min(n, len(names))]
}
