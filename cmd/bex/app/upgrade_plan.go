package app

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"bex.co/bex/web/api/apiclient"
)

// upgradeSpecFlags are the flags `bex upgrade plan` and `bex upgrade start`
// share: the part of a FleetUpgrade's spec that decides the plan.
type upgradeSpecFlags struct {
	to, from    string
	selectors   []string
	canary      string
	waves       []string
	maxParallel int32
}

func (f *upgradeSpecFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.to, "to", "", "the Kubernetes version to upgrade to, such as v1.37.2 (required)")
	fs.StringVar(&f.from, "from", "", "the version the fleet runs, such as v1.36.0: clusters on another minor version are refused")
	fs.StringArrayVar(&f.selectors, "selector", nil, "select clusters by label, as kubectl -l (env=prod,tier!=db); repeat to add requirements (default: every cluster)")
	fs.StringVar(&f.canary, "canary", "", "NAMESPACE/NAME of the cluster to upgrade first, alone")
	fs.StringArrayVar(&f.waves, "wave", nil, "a wave, as NAME:SELECTOR (eu:region=eu), upgraded in the order given after the canary; repeatable")
	fs.Int32Var(&f.maxParallel, "max-parallel", 0, "most clusters upgraded at once (default 1)")
}

// request checks the flags and returns the plan request they make.
func (f *upgradeSpecFlags) request() (apiclient.UpgradePlanRequest, error) {
	if f.to == "" {
		return apiclient.UpgradePlanRequest{}, usagef("which version? add --to, such as --to v1.37.2")
	}
	req := apiclient.UpgradePlanRequest{
		TargetVersion:       f.to,
		FromVersion:         f.from,
		ClusterSelector:     strings.Join(f.selectors, ","),
		CanaryCluster:       f.canary,
		MaxParallelClusters: f.maxParallel,
	}
	for _, w := range f.waves {
		name, sel, ok := strings.Cut(w, ":")
		if !ok || name == "" || strings.TrimSpace(sel) == "" {
			return req, usagef("--wave %q: want NAME:SELECTOR, such as eu:region=eu", w)
		}
		req.Waves = append(req.Waves, apiclient.UpgradeWave{Name: name, ClusterSelector: sel})
	}
	return req, nil
}

func newUpgradePlanCommand(st *state) *cobra.Command {
	f := &upgradeSpecFlags{}
	cmd := &cobra.Command{
		Use:   "plan --to VERSION [--from VERSION] [--selector K=V] [--canary NS/NAME] [--wave NAME:SELECTOR]",
		Short: "Show which clusters a fleet upgrade would take, in which order, and which it would skip or refuse (operators)",
		Long: "plan computes, without changing anything, what `bex upgrade start` with the same flags would do to the\n" +
			"Cluster API clusters of the management cluster as they are now: the canary, the waves, the remaining clusters\n" +
			"and the management cluster last, and the clusters skipped (at the target already) or refused, with why.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := f.request()
			if err != nil {
				return err
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			p, err := c.PlanUpgrade(cmd.Context(), req)
			if err != nil {
				return explain(err)
			}
			return st.render(p, func(w io.Writer) error { return renderUpgradePlan(w, p) })
		},
	}
	f.addFlags(cmd.Flags())
	return cmd
}

// renderUpgradePlan writes one row per selected cluster in upgrade order
// (then the skipped and refused ones), and what to do about the refused.
func renderUpgradePlan(w io.Writer, p apiclient.UpgradePlan) error {
	n := 0
	for _, s := range p.Stages {
		n += len(s.Clusters)
	}
	if _, err := fmt.Fprintf(w, "Plan to %s: %s in %s; %d skipped, %d refused.\n", p.TargetVersion,
		plural(n, "cluster"), plural(len(p.Stages), "stage"), len(p.Skipped), len(p.Refused)); err != nil {
		return err
	}
	if n+len(p.Skipped)+len(p.Refused) == 0 {
		_, err := fmt.Fprintln(w, "No Cluster API cluster matches: check --selector, or the clusters' labels.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\nSTAGE\tAT ONCE\tCLUSTER\tVERSION\tDECISION")
	for _, s := range p.Stages {
		for _, c := range s.Clusters {
			decision := "upgrade to " + c.ToVersion
			if c.Management {
				decision += " (management cluster, last)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", s.Name, s.MaxParallel, c.Name, c.FromVersion, decision)
		}
	}
	for _, d := range append(append([]apiclient.UpgradeDecision{}, p.Skipped...), p.Refused...) {
		fmt.Fprintf(tw, "-\t-\t%s\t%s\t%s (%s)\n", d.Cluster, orDash(d.Version), d.Decision, d.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(p.Refused) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("\nRefused:\n")
	for _, d := range p.Refused {
		fmt.Fprintf(&b, "  %s: %s\n", d.Cluster, d.Message)
	}
	b.WriteString("\nA fleet upgrade does not start while a selected cluster is refused (PreflightPassed=False, VersionSkew):\n" +
		"fix those clusters, or leave them out with --selector.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// plural writes n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
