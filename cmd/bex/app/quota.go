package app

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newQuotaCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "quota",
		Short: "Show the tenant's quotas and what it uses of each",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			q, err := c.Quota(cmd.Context())
			if err != nil {
				return explain(err)
			}
			return st.render(q, func(w io.Writer) error { return renderQuota(w, q) })
		},
	}
}

// renderQuota writes one line per quota: its name, value, and usage.
func renderQuota(w io.Writer, q apiclient.Quota) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "QUOTA\tLIMIT\tUSED")
	for _, r := range q.Rows() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Key, r.Limit, r.Used)
	}
	return tw.Flush()
}
