package app

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newPsCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "ps [APP]",
		Short: "Show an app's instances: state and since when, release, restarts after crashes, and the cluster it runs on",
		Long: "ps shows what runs of the app now, as the runtime reports it: each instance (web.0), its state (starting, up,\n" +
			"unhealthy, crashed, stopping) and since when, the release it runs and how often it crashed and was restarted.\n" +
			"Without APP, the app of the git checkout's remote named bex.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, c, err := st.namedAppClient(cmd.Context(), args)
			if err != nil {
				return err
			}
			is, err := c.Instances(cmd.Context(), name)
			if err != nil {
				return explain(err)
			}
			return st.render(is, func(w io.Writer) error { return st.renderInstances(w, is, time.Now()) })
		},
	}
}

// renderInstances writes what runs of an app at now: a line that says
// where and how it runs, then a row per instance.
func (st *state) renderInstances(w io.Writer, is apiclient.Instances, now time.Time) error {
	where := is.App
	if is.Cluster != "" {
		where += " on " + is.Cluster
	}
	if len(is.Instances) == 0 {
		_, err := fmt.Fprintf(w, "No instances of %s: %s\n", where, is.Message)
		return err
	}
	if _, err := fmt.Fprintf(w, "%s: %s\n", where, is.Message); err != nil {
		return err
	}
	rows := make([][]string, 0, len(is.Instances))
	for _, i := range is.Instances {
		rows = append(rows, []string{i.Name, i.State, ago(now.Sub(i.Since)), releaseName(int64(i.Release)), strconv.Itoa(i.Restarts)})
	}
	return st.table([]string{"INSTANCE", "STATE", "SINCE", "RELEASE", "RESTARTS"}, rows)
}

// ago says how long ago something happened, to the unit that matters:
// 42s ago, 12m ago, 3h12m ago, 2d4h ago.
func ago(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm ago", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh ago", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}
