package app

import (
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

// memberList is what bex members list -o json prints: the members, and
// the pending invitations when the caller may see them (an admin).
type memberList struct {
	Members     []apiclient.Member     `json:"members"`
	Invitations []apiclient.Invitation `json:"invitations"`
}

func newMembersListCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the tenant's members and their roles, and (to an admin) the pending invitations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			ms, err := c.ListMembers(cmd.Context())
			if err != nil {
				return explain(err)
			}
			invs, err := c.ListInvitations(cmd.Context())
			if apiclient.IsStatus(err, http.StatusForbidden) {
				invs, err = nil, nil // only admins see them
			}
			if err != nil {
				return explain(err)
			}
			l := memberList{Members: ms, Invitations: invs}
			if l.Invitations == nil {
				l.Invitations = []apiclient.Invitation{}
			}
			return st.renderMemberList(l, "an admin invites one with bex members add EMAIL --role developer")
		},
	}
}

// renderMemberList prints the members and the pending invitations of l;
// none says how to invite one (hint).
func (st *state) renderMemberList(l memberList, hint string) error {
	return st.render(l, func(w io.Writer) error {
		if len(l.Members) == 0 && len(l.Invitations) == 0 {
			_, err := fmt.Fprintln(w, "No members yet: "+hint)
			return err
		}
		rows := make([][]string, 0, len(l.Members)+len(l.Invitations))
		for _, m := range l.Members {
			email := m.Email
			if m.You {
				email += " (you)"
			}
			rows = append(rows, []string{email, m.Role, "member since " + m.CreatedAt.UTC().Format(timeFormat)})
		}
		for _, inv := range l.Invitations {
			rows = append(rows, []string{inv.Email, inv.Role, "invited by " + inv.InvitedBy + ", until " + inv.ExpiresAt.UTC().Format(timeFormat)})
		}
		return st.table([]string{"EMAIL", "ROLE", "STATUS"}, rows)
	})
}
