package app

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newRollbackCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "rollback APP [RELEASE]",
		Short: "Run an earlier release again (default: the one before the current), as a new release",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			to := 0
			if len(args) == 2 {
				n, ok := apiclient.ParseReleaseNumber(args[1])
				if !ok {
					return usagef("release %q: give a release as bex releases %s lists it, such as v2", args[1], args[0])
				}
				to = n
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			rb, err := c.Rollback(cmd.Context(), args[0], to)
			if err != nil {
				return explain(err)
			}
			return st.render(rb, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Rolling %s back to v%d: release v%d.\n", args[0], rb.RolledBackTo, rb.Release)
				return err
			})
		},
	}
}
