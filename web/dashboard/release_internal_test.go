package dashboard

import (
	"reflect"
	"testing"

	"bex.co/bex/web/api/apiclient"
)

// TestReleaseOrigin: the three descriptions the platform writes are told
// apart; anything else is shown as it is.
func TestReleaseOrigin(t *testing.T) {
	for _, tc := range []struct {
		desc, commit string
		want         origin
	}{
		{"Deploy abc1234", "abc1234def", origin{Kind: "push", Summary: "Deploy abc1234", Commit: "abc1234def"}},
		{"Deploy abc1234", "", origin{Kind: "push", Summary: "Deploy abc1234", Commit: "abc1234"}},
		{"Rollback to v12", "abc", origin{Kind: "rollback", Summary: "Rollback to v12", To: 12}},
		{"Rollback to vX", "", origin{Kind: "other", Summary: "Rollback to vX"}},
		{"Set FOO, BAR; unset BAZ", "abc", origin{Kind: "config", Summary: "Set FOO, BAR; unset BAZ"}},
		{"Unset FOO", "", origin{Kind: "config", Summary: "Unset FOO"}},
		{"Imported from Heroku", "", origin{Kind: "other", Summary: "Imported from Heroku"}},
	} {
		r := apiclient.ReleaseInfo{Release: apiclient.Release{Description: tc.desc}, Commit: tc.commit}
		if got := releaseOrigin(r); got != tc.want {
			t.Errorf("releaseOrigin(%q, commit %q) = %+v, want %+v", tc.desc, tc.commit, got, tc.want)
		}
	}
}

// TestReleaseEnv: each variable is marked with what the release did to
// it, and the removed ones follow.
func TestReleaseEnv(t *testing.T) {
	r := apiclient.ReleaseInfo{
		Env:     []apiclient.ReleaseEnvVar{{Name: "A"}, {Name: "B", Secret: true}, {Name: "C"}},
		Changes: apiclient.ReleaseChanges{Previous: 1, Added: []string{"A"}, Changed: []string{"B"}, Removed: []string{"D"}},
	}
	want := []envRow{{Name: "A", Change: "added"}, {Name: "B", Secret: true, Change: "changed"}, {Name: "C"}, {Name: "D", Change: "removed"}}
	if got := releaseEnv(r); !reflect.DeepEqual(got, want) {
		t.Errorf("releaseEnv = %+v, want %+v", got, want)
	}
}
