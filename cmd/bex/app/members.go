package app

import (
	"github.com/spf13/cobra"
)

// newMembersCommand is the parent of the commands on the tenant's members
// and invitations; each subcommand has its own members_*.go file. Alone,
// it lists them.
func newMembersCommand(st *state) *cobra.Command {
	list := newMembersListCommand(st)
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List, invite and remove the tenant's members, and set their roles (viewer, developer, admin)",
		Long: "A tenant's members each have a role: a viewer reads; a developer also pushes, deploys, changes env, scales,\n" +
			"restarts, rolls back and manages routes and SSH keys; an admin also manages members and everyone's tokens.\n" +
			"An admin invites with bex members add; the invitee joins with bex login --invite CODE.",
		Args: cobra.NoArgs,
		RunE: list.RunE,
	}
	cmd.AddCommand(
		list,
		newMembersAddCommand(st),
		newMembersSetRoleCommand(st),
		newMembersRemoveCommand(st),
	)
	return cmd
}
