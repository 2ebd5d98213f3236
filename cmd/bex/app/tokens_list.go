package app

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newTokensListCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List your tokens (an admin: every token of the tenant), never their secrets; * marks the one in use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			ts, err := c.ListTokens(cmd.Context())
			if err != nil {
				return explain(err)
			}
			return st.render(ts, func(w io.Writer) error {
				if len(ts) == 0 {
					_, err := fmt.Fprintln(w, "No tokens: make one with bex tokens create NAME")
					return err
				}
				rows := make([][]string, 0, len(ts))
				for _, t := range ts {
					name := t.Name
					if t.Current {
						name += " *"
					}
					lastUsed, expires := "-", "never"
					if t.LastUsedAt != nil {
						lastUsed = t.LastUsedAt.UTC().Format(timeFormat)
					}
					if t.ExpiresAt != nil {
						expires = t.ExpiresAt.UTC().Format(timeFormat)
						if t.Expired {
							expires += " (expired)"
						}
					}
					user := t.User
					if user == "" {
						user = "(tenant)"
					}
					rows = append(rows, []string{t.ID, name, t.Prefix + "…", t.Scope, user, t.CreatedAt.UTC().Format(timeFormat), lastUsed, expires})
				}
				return st.table([]string{"ID", "NAME", "PREFIX", "SCOPE", "OWNER", "CREATED", "LAST USED", "EXPIRES"}, rows)
			})
		},
	}
}
