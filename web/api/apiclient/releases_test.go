package apiclient_test

import (
	"testing"

	"bex.co/bex/web/api/apiclient"
)

// TestParseReleaseNumber: a release is read as bex releases names it, v3
// or 3 in any case; nothing else is one.
func TestParseReleaseNumber(t *testing.T) {
	for s, want := range map[string]int{"3": 3, "v3": 3, "V51": 51, "0": 0, "v0": 0, "-2": 0, "v": 0, "": 0, "latest": 0, "vv3": 0, "3.0": 0} {
		n, ok := apiclient.ParseReleaseNumber(s)
		if ok != (want > 0) || ok && n != want {
			t.Errorf("ParseReleaseNumber(%q) = %d, %v; want %d", s, n, ok, want)
		}
	}
}

// TestOlderReleases: only a full page whose last release is not v1 has
// older releases, starting below that last one.
func TestOlderReleases(t *testing.T) {
	page := func(numbers ...int) []apiclient.Release {
		var rs []apiclient.Release
		for _, n := range numbers {
			rs = append(rs, apiclient.Release{Number: n})
		}
		return rs
	}
	for _, tc := range []struct {
		rs    []apiclient.Release
		limit int
		want  int
	}{
		{page(9, 8, 7), 3, 7},
		{page(9, 8), 3, 0},
		{page(3, 2, 1), 3, 0},
		{page(9, 5), 2, 5},
		{nil, 0, 0},
		{nil, 50, 0},
	} {
		if got := apiclient.OlderReleases(tc.rs, tc.limit); got != tc.want {
			t.Errorf("OlderReleases(%v, %d) = %d, want %d", tc.rs, tc.limit, got, tc.want)
		}
	}
}
