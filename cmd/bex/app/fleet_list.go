package app

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newFleetListCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the fleet's clusters: infrastructure, version, healthy control-plane machines, ready workers, Mixed Version Proxy, state and cordon (operators)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			fleet, err := c.ListFleet(cmd.Context())
			if err != nil {
				return explain(err)
			}
			return st.render(fleet, func(w io.Writer) error { return renderFleet(w, fleet) })
		},
	}
}

// renderFleet writes one row per cluster: HEALTHY and MACHINES are the
// control plane's, WORKERS the workers whose Node is ready of those its
// MachineDeployments want.
func renderFleet(w io.Writer, fleet []apiclient.FleetCluster) error {
	if len(fleet) == 0 {
		_, err := fmt.Fprintln(w, "No clusters. In make run, create one with: bex fleet create NAME --version VERSION")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tINFRASTRUCTURE\tVERSION\tHEALTHY\tMACHINES\tWORKERS\tMVP\tSTATE")
	for _, cl := range fleet {
		mvp := "not wired"
		if cl.MVP.Wired {
			mvp = "wired"
		}
		workers := "-"
		if cl.WorkerReplicas > 0 || len(cl.Workers) > 0 {
			workers = fmt.Sprintf("%d/%d", readyWorkers(&cl), cl.WorkerReplicas)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", cl.Name, orDash(cl.Infrastructure), orDash(cl.Version),
			healthyMachines(&cl), cl.Replicas, machineVersions(cl.Machines), workers, mvp, clusterState(&cl))
	}
	return tw.Flush()
}

// machineVersions counts the machines by version: "2 v1.36.3, 1 v1.37.2".
func machineVersions(ms []apiclient.FleetMachine) string {
	count := map[string]int{}
	var versions []string
	for _, m := range ms {
		if count[m.Version] == 0 {
			versions = append(versions, m.Version)
		}
		count[m.Version]++
	}
	slices.Sort(versions)
	parts := make([]string, len(versions))
	for i, v := range versions {
		parts[i] = fmt.Sprintf("%d %s", count[v], v)
	}
	return orDash(strings.Join(parts, ", "))
}

// clusterState is what a cluster is doing, in a word, with ",cordoned"
// when it is (as kubectl's "Ready,SchedulingDisabled").
func clusterState(cl *apiclient.FleetCluster) string {
	state := rolloutState(cl)
	switch {
	case cl.Cordoned && state == "-":
		return "cordoned"
	case cl.Cordoned:
		return state + ",cordoned"
	}
	return state
}

// rolloutState is what a cluster's machines are doing, in a word.
func rolloutState(cl *apiclient.FleetCluster) string {
	switch {
	case cl.Deleting:
		return "deleting"
	case cl.Paused:
		return "paused"
	case cl.ControlPlane == "":
		return "-"
	case fleetClusterReady(cl):
		return "ready"
	}
	return "rolling"
}
