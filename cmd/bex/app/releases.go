package app

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func newReleasesCommand(st *state) *cobra.Command {
	var kinds []string
	cmd := &cobra.Command{
		Use:   "releases APP",
		Short: "List an app's releases, newest first, with their kind (deploy, rollback, config) and status; * marks the one serving, failed those whose rollout failed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			releases, err := c.ListReleases(cmd.Context(), args[0], kinds...)
			if err != nil {
				return explain(err)
			}
			return st.render(releases, func(w io.Writer) error {
				if len(releases) == 0 {
					if len(kinds) > 0 {
						_, err := fmt.Fprintf(w, "No %s releases of %s\n", strings.Join(kinds, " or "), args[0])
						return err
					}
					_, err := fmt.Fprintf(w, "No releases of %s yet: push to its git remote\n", args[0])
					return err
				}
				rows := make([][]string, 0, len(releases))
				for _, r := range releases {
					version := releaseName(int64(r.Number))
					if r.Current {
						version = "*" + version
					}
					rows = append(rows, []string{version, orDash(r.Kind), orDash(r.Status), r.Description, r.CreatedBy, r.CreatedAt.UTC().Format(timeFormat)})
				}
				return st.table([]string{"RELEASE", "KIND", "STATUS", "DESCRIPTION", "BY", "CREATED"}, rows)
			})
		},
	}
	cmd.Flags().StringSliceVar(&kinds, "kind", nil, "list only releases of these kinds: deploy, rollback, config; comma-separated or repeated (--kind deploy,rollback)")
	cmd.AddCommand(newReleasesInfoCommand(st))
	return cmd
}
