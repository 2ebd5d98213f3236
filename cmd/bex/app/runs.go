package app

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newRunsCommand(st *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs APP",
		Short: "List an app's one-off runs (bex run), newest first: the command, who ran it, in which release, and how it ended",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			runs, err := c.ListRuns(cmd.Context(), args[0], 0)
			if err != nil {
				return explain(err)
			}
			return st.render(runs, func(w io.Writer) error {
				if len(runs) == 0 {
					_, err := fmt.Fprintf(w, "No runs of %s yet: bex run %s -- COMMAND\n", args[0], args[0])
					return err
				}
				return st.table([]string{"RUN", "COMMAND", "RELEASE", "BY", "STARTED", "TOOK", "STATUS"}, runRows(runs))
			})
		},
	}
	cmd.AddCommand(newRunsStopCommand(st))
	return cmd
}

// runRows are the table rows of runs.
func runRows(runs []apiclient.Run) [][]string {
	rows := make([][]string, 0, len(runs))
	for _, r := range runs {
		took := "-"
		if r.FinishedAt != nil {
			took = r.FinishedAt.Sub(r.StartedAt).Round(time.Second).String()
		}
		rows = append(rows, []string{
			"run." + strconv.Itoa(r.Number), commandLine(r.Command, 60), releaseName(int64(r.Release)), r.CreatedBy,
			r.StartedAt.UTC().Format(timeFormat), took, r.Summary(),
		})
	}
	return rows
}

// commandLine writes args as a shell would read them back, cut at max
// characters.
func commandLine(args []string, max int) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	line := strings.Join(quoted, " ")
	if r := []rune(line); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return line
}

// shellQuote quotes a for a POSIX shell when it needs it.
func shellQuote(a string) string {
	if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@%+,") == "" {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
