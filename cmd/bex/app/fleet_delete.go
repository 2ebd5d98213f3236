package app

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newFleetDeleteCommand(st *state) *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "delete NAME [--wait]",
		Short: "Delete a cluster of the local fleet: its machines' processes stop and its files go (make run only; operators)",
		Long: "delete deletes the Cluster of a local cluster (NAME or default/NAME); Cluster API deletes its machines and the local\n" +
			"provider stops their processes and removes their files. A cluster a fleet upgrade is rolling is refused: abort the\n" +
			"upgrade first. It returns at once (bex fleet list shows the cluster deleting), or with --wait once the cluster is gone.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := localClusterName(args[0])
			if err != nil {
				return err
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			d, err := c.DeleteLocalCluster(cmd.Context(), name)
			if err != nil {
				return explain(err)
			}
			if st.output != outputJSON {
				fmt.Fprintf(st.io.Out, "Local cluster %s: %s.\n", d.Name, d.Message)
			}
			if wait {
				progress := st.io.Out
				if st.output == outputJSON {
					progress = io.Discard
				}
				err := waitFleet(cmd.Context(), c, progress, d.Name, timeout,
					func(cl *apiclient.FleetCluster) bool { return cl == nil },
					func(cl *apiclient.FleetCluster) string {
						if cl == nil {
							return "gone"
						}
						return "deleting, " + plural(len(cl.Machines)+len(cl.Workers), "machine") + " left"
					})
				if err != nil {
					return err
				}
			}
			if st.output == outputJSON {
				return st.printJSON(d)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the cluster is gone, printing each change")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long --wait waits")
	return cmd
}
