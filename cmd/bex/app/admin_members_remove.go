package app

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newAdminMembersRemoveCommand(st *state, tenant tenantFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "remove EMAIL --tenant T",
		Short: "Remove a tenant's member (their tokens, sessions and SSH keys stop working at once), or revoke a pending invitation",
		Long: "remove removes the member with the email from the tenant; without one, it revokes the pending invitation of the email.\n" +
			"The tenant's last admin cannot be removed: invite another admin first (bex admin members add).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, c, err := tenant()
			if err != nil {
				return err
			}
			email := strings.TrimSpace(args[0])
			out := removedMember{Email: email}
			err = c.RemoveTenantMember(cmd.Context(), t, email)
			if apiclient.IsStatus(err, http.StatusNotFound) {
				// No such member: revoke their pending invitation, if
				// there is one; otherwise the 404 stands.
				invs, lerr := c.TenantInvitations(cmd.Context(), t)
				switch id := invitationOf(invs, email); {
				case lerr != nil:
					err = lerr
				case id != "":
					out.Invitation = true
					err = c.RevokeTenantInvitation(cmd.Context(), t, id)
				}
			}
			if err != nil {
				return explain(err)
			}
			return st.render(out, func(w io.Writer) error {
				msg := "Removed %s from %s: their tokens, sessions and SSH keys no longer work.\n"
				if out.Invitation {
					msg = "Revoked the invitation of %s to %s: its code no longer works.\n"
				}
				_, err := fmt.Fprintf(w, msg, email, t)
				return err
			})
		},
	}
}
