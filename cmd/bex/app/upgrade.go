package app

import "github.com/spf13/cobra"

// newUpgradeCommand is the parent of the operators' fleet-upgrade
// commands; each subcommand has its own upgrade_*.go file.
func newUpgradeCommand(st *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Operators' commands for Kubernetes upgrades of control planes",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(
		newUpgradeVerifyCommand(st),
		newUpgradePlanCommand(st),
		newUpgradeStartCommand(st),
		newUpgradeStatusCommand(st),
		newUpgradePauseCommand(st),
		newUpgradeResumeCommand(st),
		newUpgradeAbortCommand(st),
	)
	return cmd
}
