package app

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

// removedMember is what bex members remove -o json prints.
type removedMember struct {
	Email string `json:"email"`
	// Invitation is true when a pending invitation was revoked, not a
	// member removed.
	Invitation bool `json:"invitation"`
}

func newMembersRemoveCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "remove EMAIL",
		Short: "Remove a member (their tokens, sessions and SSH keys stop working at once), or revoke a pending invitation (admins)",
		Long:  "remove removes the member with the email; without one, it revokes the pending invitation of the email.\nThe tenant's last admin cannot be removed.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			email := strings.TrimSpace(args[0])
			out := removedMember{Email: email}
			err = c.RemoveMember(cmd.Context(), email)
			if apiclient.IsStatus(err, http.StatusNotFound) {
				out.Invitation = true
				err = revokeInvitationOf(cmd, c, email)
			}
			if err != nil {
				return explain(err)
			}
			return st.render(out, func(w io.Writer) error {
				msg := "Removed %s: their tokens, sessions and SSH keys no longer work.\n"
				if out.Invitation {
					msg = "Revoked the invitation of %s: its code no longer works.\n"
				}
				_, err := fmt.Fprintf(w, msg, email)
				return err
			})
		},
	}
}

// revokeInvitationOf revokes the pending invitation of email, or says
// there is neither such a member nor such an invitation.
func revokeInvitationOf(cmd *cobra.Command, c *apiclient.Client, email string) error {
	invs, err := c.ListInvitations(cmd.Context())
	if err != nil {
		return explain(err)
	}
	if id := invitationOf(invs, email); id != "" {
		return explain(c.RevokeInvitation(cmd.Context(), id))
	}
	return notFoundf("%s is neither a member nor invited: bex members list shows them", email)
}

// invitationOf returns the ID of the pending invitation of email among
// invs; "" when there is none.
func invitationOf(invs []apiclient.Invitation, email string) string {
	for _, inv := range invs {
		if strings.EqualFold(inv.Email, email) {
			return inv.ID
		}
	}
	return ""
}
