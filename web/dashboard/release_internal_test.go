package dashboard

import (
	"reflect"
	"testing"

	"bex.co/bex/web/api/apiclient"
)

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
