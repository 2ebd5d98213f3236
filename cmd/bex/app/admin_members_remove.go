package app

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func newAdminMembersRemoveCommand(st *state, tenant tenantFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "remove EMAIL --tenant T",
		Short: "Remove a tenant's member: their tokens, sessions and SSH keys stop working at once",
		Long:  "remove removes the member with the email from the tenant. The tenant's last admin cannot be removed:\ninvite another admin first (bex admin members add).",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, c, err := tenant()
			if err != nil {
				return err
			}
			email := strings.TrimSpace(args[0])
			if err := c.RemoveTenantMember(cmd.Context(), t, email); err != nil {
				return explain(err)
			}
			return st.render(removedMember{Email: email}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Removed %s from %s: their tokens, sessions and SSH keys no longer work.\n", email, t)
				return err
			})
		},
	}
}
