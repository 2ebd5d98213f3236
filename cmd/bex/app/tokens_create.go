package app

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newTokensCreateCommand(st *state) *cobra.Command {
	var scope, expiresIn string
	cmd := &cobra.Command{
		Use:   "create NAME [--scope read|write|full] [--expires-in 30d]",
		Short: "Make a token of yours and print its secret, once",
		Long: "create makes an API token that acts with your role, narrowed by --scope: read (reads only), write (at most a\n" +
			"developer's: push, deploy, env...) or full (your role). It never acts above your role. With --expires-in it\n" +
			"ends then (at most a year); without, when it is revoked. Its secret is printed this once. It takes a token of\n" +
			"scope full.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := apiclient.CreateTokenRequest{Name: args[0], Scope: scope}
			if expiresIn != "" {
				d, err := parseLifetime(expiresIn)
				if err != nil {
					return err
				}
				req.ExpiresAt = new(time.Now().Add(d).UTC().Truncate(time.Second))
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			t, err := c.CreateToken(cmd.Context(), req)
			if err != nil {
				return explain(err)
			}
			return st.render(t, func(w io.Writer) error {
				until := "until it is revoked"
				if t.Token.ExpiresAt != nil {
					until = "until " + t.Token.ExpiresAt.UTC().Format(timeFormat) + " UTC"
				}
				_, err := fmt.Fprintf(w, "Created token %s (%s, scope %s), good %s.\nIts secret, shown this once:\n  %s\n",
					t.Token.Name, t.Token.ID, t.Token.Scope, until, t.Secret)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&scope, "scope", "full", "read (reads only), write (at most a developer's) or full (your role)")
	cmd.Flags().StringVar(&expiresIn, "expires-in", "", "when it ends: days (30d) or a duration (12h); default never")
	return cmd
}
