package app

import (
	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newAdminMembersAddCommand(st *state, tenant tenantFlag) *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "add EMAIL --role viewer|developer|admin --tenant T",
		Short: "Invite someone into a tenant with a role: prints a code, good once for 7 days, to send them",
		Long: "add makes an invitation into the tenant, as its admins do with bex members add, and prints its code once.\n" +
			"The invitee joins with bex login --api URL --invite CODE, or on the dashboard's /join page.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, c, err := tenant()
			if err != nil {
				return err
			}
			inv, err := c.InviteToTenant(cmd.Context(), t, apiclient.InviteRequest{Email: args[0], Role: role})
			if err != nil {
				return explain(err)
			}
			return st.renderInvitation(inv, c.BaseURL())
		},
	}
	cmd.Flags().StringVar(&role, "role", "admin", "the member's role: viewer (reads), developer (pushes, deploys, env, scale...) or admin (also members and tokens)")
	return cmd
}
