package app

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newUpgradeStartCommand(st *state) *cobra.Command {
	f := &upgradeSpecFlags{}
	var soak time.Duration
	var wireMVP bool
	cmd := &cobra.Command{
		Use:   "start NAME --to VERSION [--from VERSION] [--selector K=V] [--canary NS/NAME] [--wave NAME:SELECTOR] [--soak D] [--wire-mvp]",
		Short: "Start a fleet upgrade: create the FleetUpgrade the controller rolls out (operators)",
		Long: "start creates a FleetUpgrade named NAME. The FleetUpgrade controller then upgrades the selected clusters one\n" +
			"control-plane machine at a time, verifying the Mixed Version Proxy after each; follow it with bex upgrade status NAME.\n" +
			"Run bex upgrade plan with the same flags first to see what it will do.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.request()
			if err != nil {
				return err
			}
			if soak < 0 {
				return usagef("--soak must not be negative")
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			req := apiclient.CreateUpgradeRequest{
				Name: args[0], TargetVersion: p.TargetVersion, FromVersion: p.FromVersion, ClusterSelector: p.ClusterSelector,
				CanaryCluster: p.CanaryCluster, Waves: p.Waves, MaxParallelClusters: p.MaxParallelClusters, WireMVP: wireMVP,
			}
			if cmd.Flags().Changed("soak") {
				req.Soak = soak.String()
			}
			u, err := c.CreateUpgrade(cmd.Context(), req)
			if err != nil {
				return explain(err)
			}
			return st.render(u, func(w io.Writer) error { return renderUpgradeStarted(w, u) })
		},
	}
	f.addFlags(cmd.Flags())
	cmd.Flags().DurationVar(&soak, "soak", 10*time.Minute, "how long each stage (the canary, each wave) stays verified before the next starts")
	cmd.Flags().BoolVar(&wireMVP, "wire-mvp", false, "set the Mixed Version Proxy flags on control planes that lack them, in a rollout before the version bump")
	return cmd
}

// renderUpgradeStarted says what was created and how to follow it.
func renderUpgradeStarted(w io.Writer, u apiclient.Upgrade) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Started fleet upgrade %s to %s.\n", u.Name, u.TargetVersion)
	fmt.Fprintf(&b, "  %s\n", upgradeSpecSummary(u))
	fmt.Fprintf(&b, "\nFollow it with:\n  bex upgrade status %s\nHold it with bex upgrade pause %s; stop it for good with bex upgrade abort %s.\n", u.Name, u.Name, u.Name)
	_, err := io.WriteString(w, b.String())
	return err
}

// upgradeSpecSummary says in one line what a FleetUpgrade's spec asks.
func upgradeSpecSummary(u apiclient.Upgrade) string {
	parts := []string{"clusters " + cmp.Or(u.ClusterSelector, "all")}
	if u.FromVersion != "" {
		parts = append(parts, "from "+u.FromVersion)
	}
	if u.CanaryCluster != "" {
		parts = append(parts, "canary "+u.CanaryCluster)
	}
	for _, wv := range u.Waves {
		parts = append(parts, fmt.Sprintf("wave %s (%s)", wv.Name, wv.ClusterSelector))
	}
	parts = append(parts, fmt.Sprintf("%d at once", u.MaxParallelClusters), "soak "+u.Soak)
	if u.WireMVP {
		parts = append(parts, "wire MVP")
	}
	return strings.Join(parts, ", ")
}
