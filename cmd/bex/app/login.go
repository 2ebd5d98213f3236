package app

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newLoginCommand(st *state) *cobra.Command {
	var apiURL, token string
	cmd := &cobra.Command{
		Use:   "login --api URL --token TOKEN",
		Short: "Check a token with the API and save both for the other commands",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if apiURL == "" || token == "" {
				return usagef("both --api and --token are needed: bex login --api URL --token TOKEN")
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
				if who.Operator {
					_, err := fmt.Fprintf(w, "Logged in to %s as an operator (token %s).\n", c.BaseURL(), who.Token)
					return err
				}
				_, err := fmt.Fprintf(w, "Logged in to %s as tenant %s (token %s).\n", c.BaseURL(), who.Tenant, who.Token)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&apiURL, "api", "", "the platform API's URL, such as http://127.0.0.1:8080")
	cmd.Flags().StringVar(&token, "token", "", "an API token (bex_...)")
	return cmd
}
