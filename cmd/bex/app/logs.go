package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newLogsCommand(st *state) *cobra.Command {
	var follow bool
	var tail int
	cmd := &cobra.Command{
		Use:   "logs APP",
		Short: "Print an app's output; -f keeps printing until interrupted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tail < 0 {
				return usagef("--tail %d: give a number of lines, 0 or more", tail)
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			enc := jsonEncoder(st.io.Out)
			err = c.Logs(cmd.Context(), args[0], tail, follow, func(l apiclient.LogLine) error {
				if st.output == outputJSON {
					return enc.Encode(l) // one object per line, as it comes
				}
				source := l.Process
				if l.Instance != "" {
					source += "." + l.Instance
				}
				_, err := fmt.Fprintf(st.io.Out, "%s %s: %s\n", l.Time.UTC().Format("2006-01-02T15:04:05.000Z"), source, l.Text)
				return err
			})
			if cmd.Context().Err() != nil {
				return nil // interrupted while following
			}
			return explain(err)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	cmd.Flags().IntVar(&tail, "tail", 100, "how many of the latest lines to print first")
	return cmd
}
