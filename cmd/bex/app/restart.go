package app

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func newRestartCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "restart APP [PROCESS]",
		Short: "Restart the current release: new instances of every process (or of PROCESS) replace the running ones, with no downtime for web",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			process := ""
			if len(args) == 2 {
				process = args[1]
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			r, err := c.Restart(cmd.Context(), args[0], process)
			if err != nil {
				return explain(err)
			}
			return st.render(r, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Restarted %s of %s: new instances of release v%d.\n", strings.Join(r.Processes, ", "), args[0], r.Release)
				return err
			})
		},
	}
}
