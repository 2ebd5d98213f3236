package app

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newTokensRevokeCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID|NAME",
		Short: "Revoke a token of yours (an admin: any of the tenant's); it is refused from the next request on, git included",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			ts, err := c.ListTokens(cmd.Context())
			if err != nil {
				return explain(err)
			}
			var found []apiclient.Token
			for _, t := range ts {
				if t.ID == args[0] || t.Name == args[0] {
					found = append(found, t)
				}
			}
			switch len(found) {
			case 0:
				return notFoundf("no token %q: bex tokens list shows them", args[0])
			case 1:
			default:
				ids := make([]string, 0, len(found))
				for _, t := range found {
					ids = append(ids, t.ID+" ("+orDash(t.User)+")")
				}
				return usagef("%d tokens are named %q: give the ID of one of %s", len(found), args[0], strings.Join(ids, ", "))
			}
			t := found[0]
			if err := c.RevokeToken(cmd.Context(), t.ID); err != nil {
				return explain(err)
			}
			return st.render(t, func(w io.Writer) error {
				msg := "Revoked token %s (%s).\n"
				if t.Current {
					msg = "Revoked token %s (%s), the one this command used: log in with another.\n"
				}
				_, err := fmt.Fprintf(w, msg, t.Name, t.ID)
				return err
			})
		},
	}
}
