package embedded

import (
	"io"

	"github.com/spf13/cobra"
)

// NewCommand returns the bex-embedded command, which writes to out.
func NewCommand(out io.Writer) *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:           "bex-embedded",
		Short:         "Run the whole bex platform on this machine, in the foreground",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), out)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
