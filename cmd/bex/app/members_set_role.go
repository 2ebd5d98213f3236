package app

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newMembersSetRoleCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "set-role EMAIL viewer|developer|admin",
		Short: "Give a member another role; it applies to their next request, git pushes included (admins)",
		Long:  "set-role changes a member's role at once: their tokens, sessions and SSH keys act with it from the next request on.\nThe tenant's last admin cannot be demoted: make another member admin first.",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			m, err := c.SetMemberRole(cmd.Context(), args[0], args[1])
			if err != nil {
				return explain(err)
			}
			return st.render(m, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s is now %s.\n", m.Email, m.Role)
				return err
			})
		},
	}
}
