package app

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newPsCommand(st *state) *cobra.Command {
	var watch bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "ps [APP]",
		Short: "Show an app's instances: state and since when, release, restarts after crashes, and the cluster it runs on; then its one-off runs",
		Long: "ps shows what runs of the app now, as the runtime reports it: each instance (web.0), its state (starting, up,\n" +
			"unhealthy, crashed, stopping) and since when, the release it runs and how often it crashed and was restarted.\n" +
			"Then, in a group of their own, its one-off runs that run (bex run): run.3, up or stopping (and who asked),\n" +
			"since when, the release, who started it, attached or detached, and the command; bex runs lists those that ended.\n" +
			"Without APP, the app of the git checkout's remote named bex. With --watch it goes on, and prints the instances\n" +
			"again, under the time, each time one of them changes, until interrupted.\n" +
			"When the runtime does not answer, ps says the instances could not be read, prints the runs all the same and\n" +
			"exits 1 (kind unavailable); --watch goes on asking.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval < time.Second {
				return usagef("--interval %s: want 1s or more", interval)
			}
			name, c, err := st.namedAppClient(cmd.Context(), args)
			if err != nil {
				return err
			}
			if watch {
				return st.watchInstances(cmd.Context(), c, name, interval)
			}
			is, err := c.Instances(cmd.Context(), name)
			if err != nil {
				return explain(err)
			}
			if err := st.render(is, func(w io.Writer) error { return st.renderInstances(w, is, time.Now()) }); err != nil {
				return err
			}
			if is.InstancesError != "" {
				// The runs are printed; what ps is for is not.
				return &Error{Kind: KindUnavailable, Message: fmt.Sprintf("the instances of %s could not be read: %s", name, is.InstancesError)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Go on and print the instances again each time one changes (state, release, restarts), until interrupted; with -o json, one object per line")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "How often --watch asks")
	return cmd
}

// watchInstances prints the app's instances, then again each time what
// runs changes, until ctx ends (Ctrl-C), which is no error. A table comes
// under a line with the time; -o json writes one object per line.
func (st *state) watchInstances(ctx context.Context, c *apiclient.Client, name string, interval time.Duration) error {
	var last string
	for {
		is, err := c.Instances(ctx, name)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return explain(err)
		}
		if key := instancesKey(is); key != last {
			last = key
			if st.output == outputJSON {
				if err := jsonEncoder(st.io.Out).Encode(is); err != nil {
					return err
				}
			} else {
				now := time.Now()
				fmt.Fprintf(st.io.Out, "--- %s\n", now.Format("15:04:05"))
				if err := st.renderInstances(st.io.Out, is, now); err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// instancesKey is what --watch compares: the instances without the time
// since their state, which changes every second.
func instancesKey(is apiclient.Instances) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%d|%t|%s|%s", is.App, is.Cluster, is.Release, is.Ready, is.Message, is.InstancesError)
	for _, i := range is.Instances {
		fmt.Fprintf(&b, "|%s %s %d %d", i.Name, i.State, i.Release, i.Restarts)
	}
	for _, r := range is.Runs {
		fmt.Fprintf(&b, "|%s %s", r.Name, r.State)
	}
	return b.String()
}

// renderInstances writes what runs of an app at now: a line that says
// where and how it runs, then a row per instance; then its one-off runs
// that run, as a group of their own (renderRunningRuns). Instances the API
// could not read (InstancesError) make the line say so, and the runs
// follow all the same.
func (st *state) renderInstances(w io.Writer, is apiclient.Instances, now time.Time) error {
	where := is.App
	if is.Cluster != "" {
		where += " on " + is.Cluster
	}
	if is.InstancesError != "" {
		if _, err := fmt.Fprintf(w, "%s: %s\n", where, is.Message); err != nil {
			return err
		}
		return st.renderRunningRuns(w, is, now)
	}
	if len(is.Instances) == 0 {
		if _, err := fmt.Fprintf(w, "No instances of %s: %s\n", where, is.Message); err != nil {
			return err
		}
		return st.renderRunningRuns(w, is, now)
	}
	if _, err := fmt.Fprintf(w, "%s: %s\n", where, is.Message); err != nil {
		return err
	}
	rows := make([][]string, 0, len(is.Instances))
	for _, i := range is.Instances {
		rows = append(rows, []string{i.Name, i.State, ago(now.Sub(i.Since)), releaseName(int64(i.Release)), strconv.Itoa(i.Restarts)})
	}
	if err := st.table([]string{"INSTANCE", "STATE", "SINCE", "RELEASE", "RESTARTS"}, rows); err != nil {
		return err
	}
	return st.renderRunningRuns(w, is, now)
}

// renderRunningRuns writes the app's one-off runs that run, when there
// are any, after a blank line and a line that counts them (as heroku ps's
// "run: one-off processes" group): a row per run with its state (up, or
// stopping and who asked), since when, release, who started it, attached
// or detached, and its command.
func (st *state) renderRunningRuns(w io.Writer, is apiclient.Instances, now time.Time) error {
	if len(is.Runs) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\nOne-off runs of %s (%d):\n", is.App, len(is.Runs)); err != nil {
		return err
	}
	rows := make([][]string, 0, len(is.Runs))
	for _, r := range is.Runs {
		state, how := r.State, "attached"
		if r.State == apiclient.RunStopping {
			state = apiclient.StoppingBy(r.StopRequestedBy)
		}
		if r.Detached {
			how = "detached"
		}
		rows = append(rows, []string{r.Name, state, ago(now.Sub(r.Since)), releaseName(int64(r.Release)), r.CreatedBy, how, commandLine(r.Command, 60)})
	}
	return st.table([]string{"RUN", "STATE", "SINCE", "RELEASE", "BY", "HOW", "COMMAND"}, rows)
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
