package app

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func newRunsStopCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "stop [APP] RUN",
		Short: "Stop a one-off run, attached or detached (run.3 or 3, as bex runs lists it): its command gets SIGTERM, then SIGKILL",
		Long: "stop ends run RUN of the app as its --timeout would, wherever it runs: its command gets SIGTERM, then SIGKILL\n" +
			"after the grace period, and its record says \"stopped by\" you (bex runs). An attached run's bex run exits with\n" +
			"status 143 saying so. A run that has ended already exits 4, an unknown one 3.\n" +
			"Without APP, the app of the git checkout's remote named bex.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := args[len(args)-1]
			number, err := strconv.Atoi(strings.TrimPrefix(strings.ToLower(ref), "run."))
			if err != nil || number < 1 || number > math.MaxInt32 {
				return usagef("run %q: give a run as bex runs lists it, such as run.3", ref)
			}
			name, c, err := st.namedAppClient(cmd.Context(), args[:len(args)-1])
			if err != nil {
				return err
			}
			r, err := c.StopRun(cmd.Context(), name, number)
			if err != nil {
				return explain(err)
			}
			return st.render(r, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Stopping run.%d of %s (%s): bex runs %s shows when it has ended.\n",
					r.Number, name, commandLine(r.Command, 60), name)
				return err
			})
		},
	}
}
