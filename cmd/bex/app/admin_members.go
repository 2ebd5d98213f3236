package app

import (
	"strings"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

// newAdminMembersCommand is the operator's twin of bex members, on the
// tenant --tenant names: how a tenant whose admins are gone gets one
// again. Each subcommand has its own admin_members_*.go file.
func newAdminMembersCommand(st *state) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List, invite and remove a tenant's members, and set their roles, as its admins do (--tenant T)",
		Long: "The operator's twin of bex members, for any tenant: recover a tenant whose admins are gone by inviting a new admin\n" +
			"and removing the old one. The tenant's last admin can be neither demoted nor removed. Each change is audited in the\n" +
			"tenant's log as the operator's (tenant.member.invite, tenant.member.role, tenant.member.remove).",
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&tenant, "tenant", "", "the tenant's name (bex admin tenant list shows them)")
	named := func() (string, *apiclient.Client, error) {
		t := strings.TrimSpace(tenant)
		if t == "" {
			return "", nil, &Error{Kind: KindUsage, Field: "tenant", Message: "give the tenant with --tenant NAME: bex admin tenant list shows them"}
		}
		c, err := st.needClient()
		return t, c, err
	}
	cmd.AddCommand(
		newAdminMembersListCommand(st, named),
		newAdminMembersAddCommand(st, named),
		newAdminMembersSetRoleCommand(st, named),
		newAdminMembersRemoveCommand(st, named),
	)
	return cmd
}

// tenantFlag returns the tenant --tenant names and the API's client, or
// the usage error of no tenant.
type tenantFlag func() (string, *apiclient.Client, error)

func newAdminMembersListCommand(st *state, tenant tenantFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "list --tenant T",
		Short: "List a tenant's members and their roles, and its pending invitations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, c, err := tenant()
			if err != nil {
				return err
			}
			ms, err := c.TenantMembers(cmd.Context(), t)
			if err != nil {
				return explain(err)
			}
			invs, err := c.TenantInvitations(cmd.Context(), t)
			if err != nil {
				return explain(err)
			}
			l := memberList{Members: ms, Invitations: invs}
			if l.Members == nil {
				l.Members = []apiclient.Member{}
			}
			if l.Invitations == nil {
				l.Invitations = []apiclient.Invitation{}
			}
			return st.renderMemberList(l, "invite one with bex admin members add EMAIL --role admin --tenant "+t)
		},
	}
}
