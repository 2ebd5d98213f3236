package app

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newAppsCommand(st *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apps",
		Short: "Create, list, show and delete apps",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listApps(cmd, st)
		},
	}
	cmd.AddCommand(newAppsCreateCommand(st), newAppsListCommand(st), newAppsInfoCommand(st), newAppsSetCommand(st), newAppsDeleteCommand(st))
	return cmd
}

func newAppsCreateCommand(st *state) *cobra.Command {
	var branch string
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an app and print its git remote and URL",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			app, err := c.CreateApp(cmd.Context(), apiclient.CreateAppRequest{Name: args[0], Branch: branch})
			if err != nil {
				return explain(err)
			}
			return st.render(app, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Created app %s.\n  git remote: %s\n  url:        %s\n\nDeploy it with:\n  git remote add bex %s\n  git push bex %s\n",
					app.Name, app.GitRemote, app.URL, app.GitRemote, app.Branch)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&branch, "branch", "", "the branch whose pushes deploy (default main)")
	return cmd
}

func newAppsListCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List your apps",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listApps(cmd, st)
		},
	}
}

func listApps(cmd *cobra.Command, st *state) error {
	c, err := st.needClient()
	if err != nil {
		return err
	}
	apps, err := c.ListApps(cmd.Context())
	if err != nil {
		return explain(err)
	}
	return st.render(apps, func(w io.Writer) error {
		if len(apps) == 0 {
			_, err := fmt.Fprintln(w, "No apps yet: create one with bex apps create NAME")
			return err
		}
		rows := make([][]string, 0, len(apps))
		for _, a := range apps {
			rows = append(rows, []string{a.Name, a.Status, releaseName(a.CurrentRelease), a.URL})
		}
		return st.table([]string{"NAME", "STATUS", "RELEASE", "URL"}, rows)
	})
}

// releaseName shows a release number as v1, v2, ..., or "-" for none.
func releaseName(n int64) string {
	if n == 0 {
		return "-"
	}
	return "v" + strconv.FormatInt(n, 10)
}

func newAppsInfoCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "info NAME",
		Short: "Show an app: its git remote, URL, status, current release and the cluster it runs on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			app, err := c.GetApp(cmd.Context(), args[0])
			if err != nil {
				return explain(err)
			}
			return st.render(app, func(w io.Writer) error { return renderAppInfo(w, app) })
		},
	}
}

// renderAppInfo writes an app's facts, one a line: among them its status
// and where it runs, each with the condition's message that says why.
func renderAppInfo(w io.Writer, app apiclient.App) error {
	status := app.Status
	if app.StatusMessage != "" {
		status += ": " + app.StatusMessage
	}
	where := app.RunsOn()
	if app.Placement != "" {
		where += " (" + app.Placement + ")"
	}
	rows := [][]string{
		{"Name:", app.Name},
		{"Git remote:", app.GitRemote},
		{"URL:", app.URL},
		{"Branch:", app.Branch},
		{"Release:", releaseName(app.CurrentRelease)},
		{"Status:", status},
		{"Cluster:", where},
	}
	if app.Maintenance {
		rows = append(rows, []string{"Mode:", "maintenance: no instance runs and the URL answers 503 with a maintenance page (bex apps set " + app.Name + " --maintenance off)"})
	}
	rows = append(rows, []string{"Created:", app.CreatedAt.UTC().Format(timeFormat)})
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "%-12s%s\n", r[0], r[1]); err != nil {
			return err
		}
	}
	return nil
}

func newAppsDeleteCommand(st *state) *cobra.Command {
	var confirm string
	cmd := &cobra.Command{
		Use:   "delete NAME --confirm NAME",
		Short: "Delete an app: it stops running and its env goes; its builds and releases stay on record",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if confirm != name {
				return usagef("deleting %s stops it and removes its env: run again with --confirm %s", name, name)
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			if err := c.DeleteApp(cmd.Context(), name); err != nil {
				return explain(err)
			}
			return st.render(map[string]string{"deleted": name}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Deleted app %s.\n", name)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&confirm, "confirm", "", "the app's name again, to confirm")
	return cmd
}
