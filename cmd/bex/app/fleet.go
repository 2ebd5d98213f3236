package app

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

// newFleetCommand is the parent of the operators' fleet commands; each
// subcommand has its own fleet_*.go file.
func newFleetCommand(st *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Operators' commands for the Cluster API clusters of the fleet, and the local fleet of make run",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(
		newFleetListCommand(st),
		newFleetCreateCommand(st),
		newFleetDeleteCommand(st),
		newFleetCordonCommand(st),
		newFleetUncordonCommand(st),
	)
	return cmd
}

// localClusterName reads NAME or default/NAME, the name of a local
// cluster on the command line.
func localClusterName(arg string) (string, error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok {
		return arg, nil
	}
	if ns != "default" || name == "" || strings.Contains(name, "/") {
		return "", usagef("cluster %q: local clusters live in namespace default: give NAME or default/NAME", arg)
	}
	return name, nil
}

// fleetPoll is how often --wait looks at the fleet.
const fleetPoll = 2 * time.Second

// waitFleet lists the fleet until done says the cluster named full
// (namespace/name; nil when it is not listed) is where it should be,
// writing each new state describe gives it to w; it fails after timeout.
func waitFleet(ctx context.Context, c *apiclient.Client, w io.Writer, full string, timeout time.Duration,
	done func(*apiclient.FleetCluster) bool, describe func(*apiclient.FleetCluster) string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		fleet, err := c.ListFleet(ctx)
		if err != nil && ctx.Err() == nil {
			return explain(err)
		}
		if err == nil {
			var cl *apiclient.FleetCluster
			for i := range fleet {
				if fleet[i].Name == full {
					cl = &fleet[i]
				}
			}
			if s := describe(cl); s != last {
				fmt.Fprintf(w, "%s: %s\n", full, s)
				last = s
			}
			if done(cl) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: still %s after %s; bex fleet list shows where it is", full, last, timeout)
		case <-time.After(fleetPoll):
		}
	}
}

// healthyMachines counts the cluster's healthy control-plane machines of
// its version.
func healthyMachines(cl *apiclient.FleetCluster) int {
	n := 0
	for _, m := range cl.Machines {
		if m.Healthy && !m.Deleting && m.Version == cl.Version {
			n++
		}
	}
	return n
}

// readyWorkers counts the cluster's workers whose Node is ready, of any
// version (a kubelet may be behind the control plane).
func readyWorkers(cl *apiclient.FleetCluster) int {
	n := 0
	for _, m := range cl.Workers {
		if m.Healthy && !m.Deleting {
			n++
		}
	}
	return n
}

// fleetClusterReady says whether every machine the cluster wants is
// there and healthy: the control plane's at its version, the workers'
// Nodes ready.
func fleetClusterReady(cl *apiclient.FleetCluster) bool {
	return healthyMachines(cl) == int(cl.Replicas) && len(cl.Machines) == int(cl.Replicas) &&
		readyWorkers(cl) == int(cl.WorkerReplicas) && len(cl.Workers) == int(cl.WorkerReplicas)
}
