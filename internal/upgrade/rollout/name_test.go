package rollout

import "testing"

func TestReplacementName(t *testing.T) {
	for _, tc := range []struct {
		old, oldVersion, version string
		taken                    []string
		want                     string
	}{
		{old: "apiserver-1", oldVersion: "1.36.3", version: "1.37.2", want: "apiserver-1-1.37.2"},
		{old: "apiserver-1-1.36.3", oldVersion: "1.36.3", version: "1.37.2", want: "apiserver-1-1.37.2"},
		{old: "apiserver-1-1.36.3-4", oldVersion: "1.36.3", version: "1.37.2", want: "apiserver-1-1.37.2"},
		// Back to a version the base name already had: a new generation.
		{old: "apiserver-1-1.37.2", oldVersion: "1.37.2", version: "1.36.3", taken: []string{"apiserver-1-1.36.3"}, want: "apiserver-1-1.36.3-2"},
		// Same version (a flags-only rollout): never the old server's name.
		{old: "cp-a", oldVersion: "1.37.2", version: "1.37.2", taken: []string{"cp-a", "cp-a-1.37.2", "cp-a-1.37.2-2"}, want: "cp-a-1.37.2-3"},
		{old: "cp-a-1.37.2-3", oldVersion: "1.37.2", version: "1.37.2", taken: []string{"cp-a-1.37.2", "cp-a-1.37.2-2", "cp-a-1.37.2-3"}, want: "cp-a-1.37.2-4"},
		// A name that merely ends in digits keeps them.
		{old: "node-1.36.3-x", oldVersion: "1.36.3", version: "1.37.2", want: "node-1.36.3-x-1.37.2"},
	} {
		taken := func(n string) bool {
			for _, x := range tc.taken {
				if x == n {
					return true
				}
			}
			return false
		}
		if got := replacementName(tc.old, tc.oldVersion, tc.version, taken); got != tc.want {
			t.Errorf("replacementName(%q, %q, %q) = %q, want %q", tc.old, tc.oldVersion, tc.version, got, tc.want)
		}
	}
}
