package app

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newKeysCommand(st *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Add, list and remove the SSH keys you push with",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newKeysAddCommand(st), newKeysListCommand(st), newKeysRemoveCommand(st))
	return cmd
}

func newKeysAddCommand(st *state) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "add FILE",
		Short: "Register a public key (such as ~/.ssh/id_ed25519.pub; - reads it from standard input)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var b []byte
			var err error
			if args[0] == "-" {
				b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 64<<10))
			} else {
				b, err = os.ReadFile(args[0])
			}
			if err != nil {
				return fmt.Errorf("reading the public key: %w", err)
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			k, err := c.AddSSHKey(cmd.Context(), apiclient.AddSSHKeyRequest{Name: name, PublicKey: string(b)})
			if err != nil {
				return explain(err)
			}
			return st.render(k, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Added key %s (%s).\n", k.Name, k.Fingerprint)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "a name for the key (default: its comment)")
	return cmd
}

func newKeysListCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List your SSH keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			keys, err := c.ListSSHKeys(cmd.Context())
			if err != nil {
				return explain(err)
			}
			return st.render(keys, func(w io.Writer) error {
				if len(keys) == 0 {
					_, err := fmt.Fprintln(w, "No SSH keys: add one with bex keys add ~/.ssh/id_ed25519.pub")
					return err
				}
				rows := make([][]string, 0, len(keys))
				for _, k := range keys {
					rows = append(rows, []string{k.ID, k.Name, k.Fingerprint})
				}
				return st.table([]string{"ID", "NAME", "FINGERPRINT"}, rows)
			})
		},
	}
}

func newKeysRemoveCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "remove ID|NAME|FINGERPRINT",
		Short: "Remove an SSH key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			keys, err := c.ListSSHKeys(cmd.Context())
			if err != nil {
				return explain(err)
			}
			var found *apiclient.SSHKey
			for i, k := range keys {
				if k.ID == args[0] || k.Name == args[0] || k.Fingerprint == args[0] {
					found = &keys[i]
					break
				}
			}
			if found == nil {
				return notFoundf("no SSH key %q: bex keys list shows them", args[0])
			}
			if err := c.DeleteSSHKey(cmd.Context(), found.ID); err != nil {
				return explain(err)
			}
			return st.render(found, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Removed key %s (%s).\n", found.Name, found.Fingerprint)
				return err
			})
		},
	}
}
