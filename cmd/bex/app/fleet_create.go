package app

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newFleetCreateCommand(st *state) *cobra.Command {
	var req apiclient.CreateLocalClusterRequest
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "create NAME --version VERSION [--control-plane-replicas N] [--workers N] [--wait]",
		Short: "Create a cluster of the local fleet, whose machines are processes on this machine (make run only; operators)",
		Long: "create writes the Cluster, KubeadmControlPlane and LocalCluster of a new cluster in namespace default; Cluster API's\n" +
			"managers and the local provider then start its machines, one after the other. It returns once the objects are\n" +
			"written (follow the cluster with bex fleet list), or with --wait once every control-plane machine is healthy and\n" +
			"every worker's Node is ready. Workers get no Node labels or taints, as kubeadm workers.\n" +
			"Upgrade it with bex upgrade plan|start; delete it with bex fleet delete NAME.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := localClusterName(args[0])
			if err != nil {
				return err
			}
			req.Name = name
			c, err := st.needClient()
			if err != nil {
				return err
			}
			lc, err := c.CreateLocalCluster(cmd.Context(), req)
			if err != nil {
				return explain(err)
			}
			if st.output != outputJSON {
				if err := renderLocalClusterCreated(st.io.Out, lc, wait); err != nil {
					return err
				}
			}
			if wait {
				progress := st.io.Out
				if st.output == outputJSON {
					progress = io.Discard
				}
				err := waitFleet(cmd.Context(), c, progress, lc.Name, timeout,
					func(cl *apiclient.FleetCluster) bool { return cl != nil && fleetClusterReady(cl) },
					func(cl *apiclient.FleetCluster) string {
						if cl == nil {
							return "not listed"
						}
						s := fmt.Sprintf("%d of %d control-plane machines healthy", healthyMachines(cl), cl.Replicas)
						if cl.WorkerReplicas > 0 || len(cl.Workers) > 0 {
							s += fmt.Sprintf(", %d of %d workers ready", readyWorkers(cl), cl.WorkerReplicas)
						}
						return s
					})
				if err != nil {
					return err
				}
			}
			if st.output == outputJSON {
				return st.printJSON(lc)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Version, "version", "", "Kubernetes version of the control plane, one of the pinned versions (such as v1.36.3)")
	cmd.Flags().Int32Var(&req.ControlPlaneReplicas, "control-plane-replicas", 3, "control-plane machines, 3 to 5 (upgrades replace one at a time, with no spare machine)")
	cmd.Flags().Int32Var(&req.WorkerReplicas, "workers", 0, "worker machines, 0 to 4: each runs bex-node, which runs Pods as runc containers")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until every control-plane machine is healthy and every worker's Node ready, printing each change")
	cmd.Flags().DurationVar(&timeout, "timeout", 20*time.Minute, "how long --wait waits")
	return cmd
}

// renderLocalClusterCreated says what was created and how to follow it.
func renderLocalClusterCreated(w io.Writer, lc apiclient.LocalCluster, wait bool) error {
	workers := ""
	if lc.WorkerReplicas > 0 {
		workers = " and " + plural(int(lc.WorkerReplicas), "worker")
	}
	fmt.Fprintf(w, "Created local cluster %s: Kubernetes %s, %d control-plane machines%s, API at https://%s (addresses %s).\n",
		lc.Name, lc.Version, lc.ControlPlaneReplicas, workers, lc.Endpoint, lc.AddressBlock)
	if wait {
		_, err := fmt.Fprintln(w, "Cluster API makes its machines one after the other; waiting until they are healthy.")
		return err
	}
	_, err := fmt.Fprintln(w, "Cluster API makes its machines one after the other (a few minutes). Follow it with:\n  bex fleet list")
	return err
}
