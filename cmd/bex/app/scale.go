package app

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func newScaleCommand(st *state) *cobra.Command {
	var plan string
	cmd := &cobra.Command{
		Use:   "scale APP [PROCESS=COUNT...] [--plan NAME]",
		Short: "Set how many instances of each process run (web=3 worker=1), and the plan, applied at once to the current release with no downtime for web; no release is made",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			counts, err := parseCounts(args[1:])
			if err != nil {
				return err
			}
			if len(counts) == 0 && plan == "" {
				return usagef("nothing to scale: give PROCESS=COUNT (web=2), --plan, or both")
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			r, err := c.Scale(cmd.Context(), args[0], counts, plan)
			if err != nil {
				return explain(err)
			}
			return st.render(r, func(w io.Writer) error {
				var parts []string
				for _, name := range slices.Sorted(maps.Keys(r.Processes)) {
					parts = append(parts, fmt.Sprintf("%s=%d", name, r.Processes[name]))
				}
				formation := strings.Join(parts, " ")
				if r.Release == 0 {
					_, err := fmt.Fprintf(w, "Stored: %s has no release yet; its first push runs %s on plan %s.\n", args[0], formation, r.Plan)
					return err
				}
				_, err := fmt.Fprintf(w, "Scaled %s to %s on plan %s: release v%d runs it now.\n", args[0], formation, r.Plan, r.Release)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&plan, "plan", "", "The plan each instance runs on: starter, standard or pro")
	return cmd
}

// parseCounts reads PROCESS=COUNT arguments.
func parseCounts(args []string) (map[string]int, error) {
	counts := map[string]int{}
	for _, a := range args {
		name, count, ok := strings.Cut(a, "=")
		n, err := strconv.Atoi(count)
		switch {
		case !ok || name == "":
			return nil, usagef("%q: give PROCESS=COUNT, such as web=2", a)
		case err != nil:
			return nil, usagef("%q: the count of instances is a whole number, such as %s=2", a, name)
		}
		counts[name] = n
	}
	return counts, nil
}
