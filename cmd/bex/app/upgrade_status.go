package app

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newUpgradeStatusCommand(st *state) *cobra.Command {
	var probes bool
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show a fleet upgrade: each cluster's phase, versions, steps and last verification, its conditions and records; without NAME, list them (operators)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			if len(args) == 0 {
				us, err := c.ListUpgrades(cmd.Context())
				if err != nil {
					return explain(err)
				}
				return st.render(us, func(w io.Writer) error { return renderUpgradeList(w, us) })
			}
			u, err := c.GetUpgrade(cmd.Context(), args[0], probes)
			if err != nil {
				return explain(err)
			}
			return st.render(u, func(w io.Writer) error { return renderUpgradeStatus(w, u) })
		},
	}
	cmd.Flags().BoolVar(&probes, "probes", false, "show the recorded samples of failed probes")
	return cmd
}

// renderUpgradeList writes one row per FleetUpgrade.
func renderUpgradeList(w io.Writer, us []apiclient.Upgrade) error {
	if len(us) == 0 {
		_, err := fmt.Fprintln(w, "No fleet upgrades. Plan one with: bex upgrade plan --to VERSION")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTARGET\tPHASE\tHELD\tRUN\tCREATED")
	for _, u := range us {
		run := "-"
		if u.Run != nil {
			run = u.Run.State
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", u.Name, u.TargetVersion, orDash(u.Phase), held(u), run, u.CreatedAt.UTC().Format(timeFormat))
	}
	return tw.Flush()
}

// held says whether the operator paused or aborted the FleetUpgrade.
func held(u apiclient.Upgrade) string {
	switch {
	case u.Aborted:
		return "aborted"
	case u.Paused:
		return "paused"
	}
	return "-"
}

// renderUpgradeStatus writes the FleetUpgrade's summary, a row per
// cluster, each cluster's last verification with its evidence line, the
// conditions, and the recorded steps.
func renderUpgradeStatus(w io.Writer, u apiclient.Upgrade) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	phase := u.Phase
	if phase == "" {
		phase = "- (the FleetUpgrade controller has not reported yet)"
	}
	fmt.Fprintf(tw, "Fleet upgrade %s to %s: %s\n", u.Name, u.TargetVersion, phase)
	fmt.Fprintf(tw, "  %s\n", upgradeSpecSummary(u))
	switch {
	case u.Aborted:
		fmt.Fprintln(tw, "  Aborted: final; clusters stopped mid-rollout stay paused at mixed versions.")
	case u.Paused:
		fmt.Fprintf(tw, "  Paused by an operator: bex upgrade resume %s goes on.\n", u.Name)
	}
	if r := u.Run; r != nil {
		fmt.Fprintf(tw, "  Recorded run: %s since %s%s\n", r.State, r.StartedAt.UTC().Format(timeFormat), suffix(": ", r.Message))
	}

	if len(u.Clusters) > 0 {
		fmt.Fprintln(tw, "\nCLUSTER\tWAVE\tPHASE\tVERSION\tSTEPS\tVERIFIED")
		for _, c := range u.Clusters {
			verified := "-"
			if v := c.LastVerification; v != nil {
				verified = verdict(v.Passed) + " " + v.Reason
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s -> %s\t%s\t%s\n", c.Name, orDash(c.Wave), orDash(c.Phase), orDash(c.FromVersion), orDash(c.ToVersion), stepSummary(c.Steps), verified)
		}
		var lines []string
		for _, c := range u.Clusters {
			if v := c.LastVerification; v != nil {
				lines = append(lines, fmt.Sprintf("  %s (%s, %s): %s %s%s", c.Name, v.Time.UTC().Format(timeFormat),
					plural(len(v.APIServers), "apiserver"), verdict(v.Passed), v.Reason, suffix(": ", firstLine(v.Message))))
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(tw, "\nLast verification:\n%s\n", strings.Join(lines, "\n"))
		}
	}

	if len(u.Conditions) > 0 {
		fmt.Fprintln(tw, "\nTYPE\tSTATUS\tREASON\tSINCE\tMESSAGE")
		for _, c := range u.Conditions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Since.UTC().Format(timeFormat), orDash(firstLine(c.Message)))
		}
	}

	if u.Run != nil && len(u.Run.Steps) > 0 {
		fmt.Fprintln(tw, "\nRecorded steps:\nSEQ\tCLUSTER\tKIND\tMACHINE\tOUTCOME\tPROBES\tMESSAGE")
		for _, s := range u.Run.Steps {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Seq, s.Cluster, s.Kind, orDash(s.Machine), s.Outcome, probeCounts(s.Probes), orDash(firstLine(s.Message)))
		}
		var failed []string
		for _, s := range u.Run.Steps {
			for _, p := range s.FailedProbes {
				failed = append(failed, fmt.Sprintf("  step %d %s %s %s: %d %s%s", s.Seq, p.APIServer, p.Verb, p.Resource, p.Status, p.Outcome, suffix(" ", firstLine(p.Message))))
			}
		}
		if len(failed) > 0 {
			fmt.Fprintf(tw, "\nFailed probes:\n%s\n", strings.Join(failed, "\n"))
		}
	}
	return tw.Flush()
}

func verdict(passed bool) string {
	if passed {
		return "PASS"
	}
	return "FAIL"
}

// stepSummary counts a cluster's machine steps by verdict, such as
// "2 passed, 1 failed".
func stepSummary(steps []apiclient.UpgradeMachineStep) string {
	if len(steps) == 0 {
		return "-"
	}
	counts := map[string]int{}
	var order []string
	for _, s := range steps {
		v := strings.ToLower(cmp.Or(s.Verdict, "pending"))
		if counts[v] == 0 {
			order = append(order, v)
		}
		counts[v]++
	}
	parts := make([]string, 0, len(order))
	for _, v := range order {
		parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
	}
	return strings.Join(parts, ", ")
}

// probeCounts writes probe counts as Outcome=N, by outcome name.
func probeCounts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// suffix returns sep+s, or "" when s is empty.
func suffix(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}
