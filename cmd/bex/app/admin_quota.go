package app

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newAdminQuotaCommand(st *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota TENANT",
		Short: "Show a tenant's quotas, which the operator set, and its usage",
		Long: "quota shows each of the tenant's quotas in force, whether it is the platform's default or set for the tenant\n" +
			"(with the default beside it), and what the tenant uses of it. `bex admin quota set` changes them.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			q, err := c.TenantQuota(cmd.Context(), args[0])
			if err != nil {
				return explain(err)
			}
			return st.render(q, func(w io.Writer) error { return renderAdminQuota(w, q) })
		},
	}
	cmd.AddCommand(newAdminQuotaSetCommand(st))
	return cmd
}

// renderAdminQuota writes one line per quota: its name, the value in
// force, where it comes from, the default and the usage.
func renderAdminQuota(w io.Writer, q apiclient.Quota) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "QUOTA\tLIMIT\tSOURCE\tDEFAULT\tUSED")
	for _, r := range q.Rows() {
		source := "default"
		if r.Set {
			source = "operator"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Key, r.Limit, source, r.Default, r.Used)
	}
	return tw.Flush()
}
