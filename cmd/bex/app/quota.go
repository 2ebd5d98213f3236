package app

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"bex.co/bex/internal/store"
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
	for _, r := range [][3]string{
		{"apps", strconv.Itoa(q.Quotas.Apps), strconv.Itoa(q.Usage.Apps)},
		{"routes", strconv.Itoa(q.Quotas.Routes), strconv.Itoa(q.Usage.Routes)},
		{"concurrentBuilds", strconv.Itoa(q.Quotas.ConcurrentBuilds), strconv.Itoa(q.Usage.RunningBuilds)},
		{"buildMinutes", strconv.Itoa(q.Quotas.BuildMinutes) + " a month",
			fmt.Sprintf("%d since %s", q.Usage.BuildMinutes, q.BuildMinutesSince.UTC().Format("2006-01-02"))},
		{"repoBytes", store.FormatBytes(q.Quotas.RepoBytes), "checked at each push"},
		{"concurrentRuns", strconv.Itoa(q.Quotas.ConcurrentRuns), strconv.Itoa(q.Usage.RunningRuns)},
		{"instances", strconv.Itoa(q.Quotas.Instances), strconv.Itoa(q.Usage.Instances)},
		{"cpu", store.FormatMilliCPU(q.Quotas.MilliCPU), store.FormatMilliCPU(q.Usage.MilliCPU)},
		{"memory", store.FormatBytes(q.Quotas.MemoryBytes), store.FormatBytes(q.Usage.MemoryBytes)},
	} {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r[0], r[1], r[2])
	}
	return tw.Flush()
}
