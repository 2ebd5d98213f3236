package app

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

// maxReleasePage is the most releases the API lists at once.
const maxReleasePage = 1000

func newReleasesCommand(st *state) *cobra.Command {
	var (
		kinds    []string
		statuses []string
		before   string
		limit    int
	)
	cmd := &cobra.Command{
		Use:   "releases APP",
		Short: "List an app's releases, newest first, with their kind (deploy, rollback, config) and status; * marks the one serving, failed those whose rollout failed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			page := apiclient.ReleasePage{Kinds: kinds, Statuses: statuses, Limit: limit}
			if limit < 1 || limit > maxReleasePage {
				return usagef("--limit %d: give 1 to %d", limit, maxReleasePage)
			}
			for _, st := range statuses {
				if !slices.Contains(apiclient.ReleaseStatusFilters(), st) {
					return usagef("--status %q: give %s; comma-separated or repeated", st, strings.Join(apiclient.ReleaseStatusFilters(), " or "))
				}
			}
			if before != "" {
				n, ok := apiclient.ParseReleaseNumber(before)
				if !ok {
					return usagef("--before %q: give a release number, such as v51 (the last one a page listed)", before)
				}
				page.Before = n
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			releases, err := c.ListReleasesPage(cmd.Context(), args[0], page)
			if err != nil {
				return explain(err)
			}
			return st.render(releases, func(w io.Writer) error {
				if len(releases) == 0 {
					if len(kinds) > 0 || len(statuses) > 0 {
						what := slices.DeleteFunc([]string{strings.Join(statuses, " or "), strings.Join(kinds, " or ")}, func(s string) bool { return s == "" })
						_, err := fmt.Fprintf(w, "No %s releases of %s\n", strings.Join(what, " "), args[0])
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
				if err := st.table([]string{"RELEASE", "KIND", "STATUS", "DESCRIPTION", "BY", "CREATED"}, rows); err != nil {
					return err
				}
				if older := apiclient.OlderReleases(releases, limit); older > 0 {
					// The next page's command keeps the filters.
					next := args[0]
					if len(kinds) > 0 {
						next += " --kind " + strings.Join(kinds, ",")
					}
					if len(statuses) > 0 {
						next += " --status " + strings.Join(statuses, ",")
					}
					_, err := fmt.Fprintf(w, "Older releases: bex releases %s --before %s\n", next, releaseName(int64(older)))
					return err
				}
				return nil
			})
		},
	}
	cmd.Flags().StringSliceVar(&kinds, "kind", nil, "list only releases of these kinds: deploy, rollback, config; comma-separated or repeated (--kind deploy,rollback)")
	cmd.Flags().StringSliceVar(&statuses, "status", nil, "list only releases that went out (succeeded: current, superseded or pruned now) or whose rollout failed (failed); comma-separated or repeated")
	cmd.Flags().StringVar(&before, "before", "", "list only releases older than this one (v51 or 51): the next page after one that ended with it")
	cmd.Flags().IntVarP(&limit, "limit", "n", 50, fmt.Sprintf("list at most this many releases (1 to %d)", maxReleasePage))
	cmd.AddCommand(newReleasesInfoCommand(st))
	return cmd
}
