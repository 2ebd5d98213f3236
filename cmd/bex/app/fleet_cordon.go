package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

// Cordon and uncordon are one command each, made by
// newFleetCordonChangeCommand: they differ only in the call and the words.

func newFleetCordonCommand(st *state) *cobra.Command {
	return newFleetCordonChangeCommand(st, "cordon",
		"Stop placing apps on a cluster of the fleet and move those it runs to other clusters (operators)",
		"cordon sets the annotation scheduling.bex.co/cordoned=true on a Cluster API cluster of the fleet, of any provider.\n"+
			"The scheduler places no new app on it, and the App controller places the apps it runs on other clusters: each\n"+
			"starts there and passes its health check before the edge switches to it and it stops on this one. An app no\n"+
			"other cluster can take stays and keeps serving. NAME is NAMESPACE/NAME as bex fleet list shows it, or the\n"+
			"cluster's name alone when one cluster of the fleet has it. bex fleet uncordon NAME takes placements again.",
		(*apiclient.Client).CordonCluster)
}

func newFleetUncordonCommand(st *state) *cobra.Command {
	return newFleetCordonChangeCommand(st, "uncordon",
		"Place apps on a cordoned cluster of the fleet again (operators)",
		"uncordon removes the annotation scheduling.bex.co/cordoned from a Cluster API cluster of the fleet: the scheduler\n"+
			"places apps on it again. The apps moved off it stay where they are. NAME is NAMESPACE/NAME as bex fleet list\n"+
			"shows it, or the cluster's name alone when one cluster of the fleet has it.",
		(*apiclient.Client).UncordonCluster)
}

func newFleetCordonChangeCommand(st *state, verb, short, long string,
	call func(*apiclient.Client, context.Context, string, string) (apiclient.ClusterCordon, error)) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Long:  long,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := splitClusterName(args[0])
			if err != nil {
				return err
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			if ns == "" {
				if ns, err = fleetNamespaceOf(cmd.Context(), c, name); err != nil {
					return err
				}
			}
			cc, err := call(c, cmd.Context(), ns, name)
			if err != nil {
				return explain(err)
			}
			return st.render(cc, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, cc.Notice())
				return err
			})
		},
	}
}

// splitClusterName reads NAMESPACE/NAME or NAME; ns is empty for NAME.
func splitClusterName(arg string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok {
		ns, name = "", arg
	}
	if name == "" || ok && ns == "" || strings.Contains(name, "/") {
		return "", "", usagef("cluster %q: give NAMESPACE/NAME as bex fleet list shows it, or NAME alone", arg)
	}
	return ns, name, nil
}

// fleetNamespaceOf returns the namespace of the one cluster of the fleet
// named name.
func fleetNamespaceOf(ctx context.Context, c *apiclient.Client, name string) (string, error) {
	fleet, err := c.ListFleet(ctx)
	if err != nil {
		return "", explain(err)
	}
	var found []string
	for _, cl := range fleet {
		if ns, n, _ := strings.Cut(cl.Name, "/"); n == name {
			found = append(found, ns)
		}
	}
	switch len(found) {
	case 0:
		return "", notFoundf("no cluster named %s in the fleet: bex fleet list shows the clusters", name)
	case 1:
		return found[0], nil
	}
	slices.Sort(found)
	return "", usagef("clusters named %s are in namespaces %s: give NAMESPACE/NAME", name, strings.Join(found, ", "))
}
