package app

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newMembersAddCommand(st *state) *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "add EMAIL --role viewer|developer|admin",
		Short: "Invite someone into the tenant with a role: prints a code, good once for 7 days, to send them (admins)",
		Long: "add makes an invitation and prints its code once. The invitee joins with\n" +
			"  bex login --api URL --invite CODE\n" +
			"or on the dashboard's /join page, and gets their first API token. Inviting the same email again replaces\n" +
			"the pending invitation: the old code stops working.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			inv, err := c.Invite(cmd.Context(), apiclient.InviteRequest{Email: args[0], Role: role})
			if err != nil {
				return explain(err)
			}
			return st.renderInvitation(inv, c.BaseURL())
		},
	}
	cmd.Flags().StringVar(&role, "role", "developer", "the member's role: viewer (reads), developer (pushes, deploys, env, scale...) or admin (also members and tokens)")
	return cmd
}

// renderInvitation prints a new invitation with its code, once, and how
// the invitee joins with it at the API base.
func (st *state) renderInvitation(inv apiclient.Invitation, base string) error {
	return st.render(inv, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "Invited %s as %s, until %s UTC.\n"+
			"Send them this code; it works once:\n  %s\n"+
			"They join with:\n  bex login --api %s --invite %s\n"+
			"or at %s/join?code=%s\n",
			inv.Email, inv.Role, inv.ExpiresAt.UTC().Format(timeFormat), inv.Code, base, inv.Code, base, inv.Code)
		return err
	})
}
