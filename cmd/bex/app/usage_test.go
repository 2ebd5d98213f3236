package app_test

import (
	"strings"
	"testing"

	"bex.co/bex/cmd/internal/command"
)

// TestUsageExitCode: a flag bex does not know, on a subcommand or on its
// own, is a usage error (exit code 2) that names the flag.
func TestUsageExitCode(t *testing.T) {
	for _, args := range [][]string{{"apps", "list", "--al"}, {"--outptu", "json", "apps", "list"}} {
		_, err := bex(t, t.TempDir(), nil, "", args...)
		if code := command.ExitCode(err); code != 2 || err == nil || !strings.Contains(err.Error(), "unknown flag: --") {
			t.Errorf("bex %q: exit %d, error %v", args, code, err)
		}
	}
}
