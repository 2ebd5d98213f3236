package app

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newBuildsCommand(st *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "builds [APP]",
		Short: "List builds, of one app or of all",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			app := ""
			if len(args) == 1 {
				app = args[0]
			}
			builds, err := c.ListBuilds(cmd.Context(), app)
			if err != nil {
				return explain(err)
			}
			return st.render(builds, func(w io.Writer) error {
				if len(builds) == 0 {
					_, err := fmt.Fprintln(w, "No builds yet: push to the app's git remote (bex apps info APP shows it)")
					return err
				}
				rows := make([][]string, 0, len(builds))
				for _, b := range builds {
					took := "-"
					if b.FinishedAt != nil {
						took = b.FinishedAt.Sub(b.StartedAt).Round(time.Second).String()
					}
					status := b.Status
					if b.Error != "" {
						status += ": " + b.Error
					}
					rows = append(rows, []string{b.App, strconv.Itoa(b.Number), orDash(shortCommit(b.Commit)), b.StartedAt.UTC().Format(timeFormat), took, status})
				}
				return st.table([]string{"APP", "BUILD", "COMMIT", "STARTED", "TOOK", "STATUS"}, rows)
			})
		},
	}
	cmd.AddCommand(newBuildsLogCommand(st))
	return cmd
}

// shortCommit is the first 7 characters of a commit's name, as git shows it.
func shortCommit(c string) string { return c[:min(len(c), 7)] }

func newBuildsLogCommand(st *state) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "log APP [BUILD]",
		Short: "Print a build's output (default: the latest build); -f follows it until the build ends",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			number := 0
			if len(args) == 2 {
				n, err := strconv.Atoi(strings.TrimPrefix(args[1], "#"))
				if err != nil || n < 1 {
					return fmt.Errorf("build %q: give a build number, as bex builds %s lists them", args[1], args[0])
				}
				number = n
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			return explain(c.BuildLog(cmd.Context(), args[0], number, follow, st.io.Out))
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing lines until the build ends")
	return cmd
}
