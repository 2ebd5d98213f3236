package app

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newReleasesInfoCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "info [APP] RELEASE",
		Short: "Show one release in full: build and commit, who and when, whether it serves, its variables by name and what it changed",
		Long: "info shows release RELEASE (v3 or 3) of the app: its kind (deploy, rollback and to what, config), its\n" +
			"description, who made it and when, whether it serves\n" +
			"(current), was replaced (superseded), can no longer run (pruned) or never went out (failed, and why), the\n" +
			"build, commit and image it runs, its\n" +
			"variables by name (never a value) and what it changed from the release before.\n" +
			"Without APP, the app of the git checkout's remote named bex.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := args[len(args)-1]
			number, ok := apiclient.ParseReleaseNumber(ref)
			if !ok {
				return usagef("release %q: give a release as bex releases lists it, such as v2", ref)
			}
			name, c, err := st.namedAppClient(cmd.Context(), args[:len(args)-1])
			if err != nil {
				return err
			}
			r, err := c.GetRelease(cmd.Context(), name, number)
			if err != nil {
				return explain(err)
			}
			return st.render(r, func(w io.Writer) error { return renderReleaseInfo(w, r) })
		},
	}
}

// renderReleaseInfo writes a release as "Label: value" lines.
func renderReleaseInfo(w io.Writer, r apiclient.ReleaseInfo) error {
	status := r.Status
	if r.Status != apiclient.ReleaseFailed && r.PrunedAt != nil {
		status += " since " + r.PrunedAt.UTC().Format(timeFormat) + ": it cannot be rolled back to"
	}
	build := "-"
	if r.Build != 0 {
		build = strconv.Itoa(r.Build)
		var about []string
		if r.Commit != "" {
			about = append(about, "commit "+shortCommit(r.Commit))
		}
		if r.Stack != "" {
			about = append(about, r.Stack)
		}
		if len(about) > 0 {
			build += " (" + strings.Join(about, ", ") + ")"
		}
	}
	env := make([]string, 0, len(r.Env))
	for _, v := range r.Env {
		if v.Secret {
			env = append(env, v.Name+" (secret)")
		} else {
			env = append(env, v.Name)
		}
	}
	kind := orDash(r.Kind)
	if r.RollbackTo != 0 {
		kind += " to " + releaseName(int64(r.RollbackTo))
	}
	rows := [][2]string{
		{"Release:", releaseName(int64(r.Number)) + " (" + status + ")"},
		{"Kind:", kind},
		{"Description:", r.Description},
		// A failed release phase quotes its last lines, indented under
		// the label.
		{"Failure:", strings.ReplaceAll(r.Failure, "\n", "\n"+strings.Repeat(" ", 13))},
		{"By:", r.CreatedBy},
		{"Created:", r.CreatedAt.UTC().Format(timeFormat)},
		{"Build:", build},
		{"Image:", orDash(r.Image)},
		{"Env:", orDash(strings.Join(env, ", "))},
		{"Changes:", releaseChangesInWords(r.Changes)},
	}
	for _, row := range rows {
		if row[0] == "Failure:" && row[1] == "" {
			continue
		}
		if _, err := fmt.Fprintf(w, "%-13s%s\n", row[0], row[1]); err != nil {
			return err
		}
	}
	return nil
}

// releaseChangesInWords says what a release changed: "from v2: new image;
// added BAR; changed FOO", "from v2: nothing", "first release: added FOO".
func releaseChangesInWords(c apiclient.ReleaseChanges) string {
	from := "from " + releaseName(int64(c.Previous))
	if c.Previous == 0 {
		from = "first release"
	}
	var parts []string
	if c.Image && c.Previous != 0 {
		parts = append(parts, "new image")
	}
	for _, ch := range []struct {
		verb  string
		names []string
	}{{"added", c.Added}, {"changed", c.Changed}, {"removed", c.Removed}} {
		if len(ch.names) > 0 {
			parts = append(parts, ch.verb+" "+strings.Join(ch.names, ", "))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing")
	}
	return from + ": " + strings.Join(parts, "; ")
}
