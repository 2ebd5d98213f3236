package app

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newLoginCommand(st *state) *cobra.Command {
	var apiURL, token, invite string
	cmd := &cobra.Command{
		Use:   "login --api URL (--token TOKEN | --invite CODE)",
		Short: "Check a token with the API, or join a tenant with an invitation's code, and save both for the other commands",
		Long: "login checks --token with the API and saves the API's URL and the token for the other commands.\n" +
			"With --invite it accepts the invitation whose code an admin sent you (bex members add): you become a member\n" +
			"with the invitation's role, and your first API token is saved. The code works once.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case apiURL == "" || token == "" && invite == "":
				return usagef("--api and one of --token or --invite are needed: bex login --api URL --token TOKEN")
			case token != "" && invite != "":
				return usagef("give --token or --invite, not both")
			}
			joined := ""
			if invite != "" {
				anyone, err := apiclient.New(apiURL, "", st.io.HTTPClient)
				if err != nil {
					return err
				}
				a, err := anyone.AcceptInvitation(cmd.Context(), apiclient.AcceptInvitationRequest{Code: invite})
				if err != nil {
					return explain(err)
				}
				token = a.Token
				joined = fmt.Sprintf("Joined tenant %s as %s, %s.\n", a.Tenant, a.Email, a.Role)
			}
			c, err := apiclient.New(apiURL, token, st.io.HTTPClient)
			if err != nil {
				return err
			}
			who, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return explain(err)
			}
			if err := saveConfig(st.configPath, Config{API: c.BaseURL(), Token: token}); err != nil {
				return err
			}
			return st.render(who, func(w io.Writer) error {
				var err error
				switch {
				case who.Operator:
					_, err = fmt.Fprintf(w, "Logged in to %s as an operator (token %s).\n", c.BaseURL(), who.Token)
				case who.Email != "":
					_, err = fmt.Fprintf(w, "%sLogged in to %s as %s, %s of tenant %s (token %s).\n", joined, c.BaseURL(), who.Email, who.Role, who.Tenant, who.Token)
				default:
					_, err = fmt.Fprintf(w, "Logged in to %s as tenant %s (token %s).\n", c.BaseURL(), who.Tenant, who.Token)
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&apiURL, "api", "", "the platform API's URL, such as http://127.0.0.1:8080")
	cmd.Flags().StringVar(&token, "token", "", "an API token (bex_...)")
	cmd.Flags().StringVar(&invite, "invite", "", "an invitation's code (bexinv_...), to join a tenant")
	return cmd
}
