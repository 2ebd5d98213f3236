package app

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newEnvCommand(st *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env",
		Short: "List, set and unset an app's environment variables",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newEnvListCommand(st), newEnvSetCommand(st), newEnvUnsetCommand(st))
	return cmd
}

func newEnvListCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "list APP",
		Short: "List an app's environment; secret values show as (secret)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			vars, err := c.ListEnv(cmd.Context(), args[0])
			if err != nil {
				return explain(err)
			}
			return st.renderEnv(args[0], vars)
		},
	}
}

func (st *state) renderEnv(app string, vars []apiclient.EnvVar) error {
	return st.render(vars, func(w io.Writer) error {
		if len(vars) == 0 {
			_, err := fmt.Fprintf(w, "%s has no environment variables: set some with bex env set %s KEY=VALUE\n", app, app)
			return err
		}
		rows := make([][]string, 0, len(vars))
		for _, v := range vars {
			value := "(secret)"
			if !v.Secret && v.Value != nil {
				value = *v.Value
			}
			rows = append(rows, []string{v.Name, value})
		}
		return st.table([]string{"NAME", "VALUE"}, rows)
	})
}

// renderEnvChange says what became of a change of app's environment, then
// lists the environment; with -o json it writes the environment alone.
func (st *state) renderEnvChange(app string, vars []apiclient.EnvVar, release int, noRelease bool) error {
	if st.output != outputJSON {
		var err error
		switch {
		case release > 0:
			_, err = fmt.Fprintf(st.io.Out, "Released %s v%d with the new environment.\n", app, release)
		case noRelease:
			_, err = fmt.Fprintf(st.io.Out, "Stored without a release: the change goes out with the next release of %s.\n", app)
		default:
			_, err = fmt.Fprintf(st.io.Out, "Stored: %s has no release yet; its first push runs with it.\n", app)
		}
		if err != nil {
			return err
		}
	}
	return st.renderEnv(app, vars)
}

func newEnvSetCommand(st *state) *cobra.Command {
	var secret, noRelease bool
	cmd := &cobra.Command{
		Use:   "set APP KEY=VALUE...",
		Short: "Set environment variables and release them at once; --secret keeps their values in a Secret, never shown again",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			set := map[string]string{}
			for _, kv := range args[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usagef("%q: write variables as KEY=VALUE", kv)
				}
				set[k] = v
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			vars, release, err := c.PatchEnv(cmd.Context(), args[0], apiclient.PatchEnvRequest{Set: set, Secret: secret, NoRelease: noRelease})
			if err != nil {
				return explain(err)
			}
			return st.renderEnvChange(args[0], vars, release, noRelease)
		},
	}
	cmd.Flags().BoolVar(&secret, "secret", false, "keep the values in the app's Secret; they are never shown again")
	cmd.Flags().BoolVar(&noRelease, "no-release", false, "store the change without releasing it; it goes out with the next release")
	return cmd
}

func newEnvUnsetCommand(st *state) *cobra.Command {
	var noRelease bool
	cmd := &cobra.Command{
		Use:   "unset APP KEY...",
		Short: "Remove environment variables and release the change at once",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			vars, release, err := c.PatchEnv(cmd.Context(), args[0], apiclient.PatchEnvRequest{Unset: args[1:], NoRelease: noRelease})
			if err != nil {
				return explain(err)
			}
			return st.renderEnvChange(args[0], vars, release, noRelease)
		},
	}
	cmd.Flags().BoolVar(&noRelease, "no-release", false, "store the change without releasing it; it goes out with the next release")
	return cmd
}
