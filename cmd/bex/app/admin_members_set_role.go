package app

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newAdminMembersSetRoleCommand(st *state, tenant tenantFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "set-role EMAIL viewer|developer|admin --tenant T",
		Short: "Give a tenant's member another role; it applies to their next request",
		Long:  "set-role changes a member's role at once, as bex members set-role does.\nThe tenant's last admin cannot be demoted: make another member admin first.",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, c, err := tenant()
			if err != nil {
				return err
			}
			m, err := c.SetTenantMemberRole(cmd.Context(), t, args[0], args[1])
			if err != nil {
				return explain(err)
			}
			return st.render(m, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s is now %s in %s.\n", m.Email, m.Role, t)
				return err
			})
		},
	}
}
