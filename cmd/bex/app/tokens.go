package app

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newTokensCommand is the parent of the commands on API tokens; each
// subcommand has its own tokens_*.go file. Alone, it lists them.
func newTokensCommand(st *state) *cobra.Command {
	list := newTokensListCommand(st)
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Make, list and revoke your API tokens (an admin: every token of the tenant)",
		Long: "A token acts with its member's role, narrowed by its scope: read (reads only), write (at most a developer's)\n" +
			"or full (the member's role). Tokens may expire; a revoked or expired token is refused from the next request\n" +
			"on, by the API and by git.",
		Args: cobra.NoArgs,
		RunE: list.RunE,
	}
	cmd.AddCommand(
		list,
		newTokensCreateCommand(st),
		newTokensRevokeCommand(st),
	)
	return cmd
}

// parseLifetime reads a token's lifetime: a number of days ("30d") or a
// Go duration ("12h").
func parseLifetime(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err == nil && n > 0 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("--expires-in %q: give days (30d) or hours and minutes (12h, 90m)", s)
}
