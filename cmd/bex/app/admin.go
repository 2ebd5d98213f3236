package app

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newAdminCommand(st *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Operators' commands (they need an operator's token)",
		Args:  cobra.NoArgs,
	}
	tenant := &cobra.Command{
		Use:   "tenant",
		Short: "Create and list tenants",
		Args:  cobra.NoArgs,
	}
	tenant.AddCommand(newAdminTenantCreateCommand(st), newAdminTenantListCommand(st))
	cmd.AddCommand(tenant, newAdminQuotaCommand(st), newAdminMembersCommand(st))
	return cmd
}

func newAdminTenantCreateCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "create NAME",
		Short: "Create a tenant and print its first API token, once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			created, err := c.CreateTenant(cmd.Context(), args[0])
			if err != nil {
				return explain(err)
			}
			return st.render(created, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Created tenant %s. Its API token, shown this once:\n\n  %s\n\nThe tenant logs in with:\n  bex login --api %s --token %s\n",
					created.Tenant.Name, created.Token, c.BaseURL(), created.Token)
				return err
			})
		},
	}
}

func newAdminTenantListCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List tenants",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			tenants, err := c.ListTenants(cmd.Context())
			if err != nil {
				return explain(err)
			}
			return st.render(tenants, func(io.Writer) error {
				rows := make([][]string, 0, len(tenants))
				for _, t := range tenants {
					rows = append(rows, []string{t.Name, t.CreatedAt.UTC().Format(timeFormat)})
				}
				return st.table([]string{"NAME", "CREATED"}, rows)
			})
		},
	}
}
