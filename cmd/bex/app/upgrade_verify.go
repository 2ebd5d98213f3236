package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/internal/upgrade/verify"
)

// ErrVerificationFailed is what `bex upgrade verify` returns, after
// printing the report, when a probe failed or something was found; like
// every error it makes bex exit with status 1. Callers tell it from an
// error that kept the verifier from running with errors.Is.
var ErrVerificationFailed = errors.New("verification failed")

// upgradeVerifyOptions are the flags of `bex upgrade verify` and what
// Complete derives from them.
type upgradeVerifyOptions struct {
	kubeconfig        string
	context           string
	apiservers        []string
	tlsServerName     string
	probeApps         bool
	namespace         string
	aggregated        []string
	removeStaleLeases bool
	staleLeaseAfter   time.Duration
	timeout           time.Duration

	targets []verify.Target
	verify  verify.Options
}

func (o *upgradeVerifyOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig with the control plane's credentials (default: $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringArrayVar(&o.apiservers, "apiserver", nil, "an apiserver's own URL, not the load balancer's, as URL or NAME=URL (NAME its hostname, which ties it to its identity lease); repeat for each")
	fs.StringVar(&o.tlsServerName, "tls-server-name", "", "name to verify the apiservers' certificates for, when they do not carry the addresses given (e.g. kubernetes.default.svc)")
	fs.BoolVar(&o.probeApps, "probe-apps", true, "create, get, list and delete a probe App (platform.bex.co) on each apiserver")
	fs.StringVar(&o.namespace, "namespace", "default", "namespace of the probe Apps")
	fs.StringArrayVar(&o.aggregated, "aggregated", nil, "GROUP/VERSION/RESOURCE of an aggregated API to list on each apiserver, e.g. scheduling.bex.co/v1alpha1/clustercapacities; repeatable")
	fs.BoolVar(&o.removeStaleLeases, "remove-stale-leases", false, "delete the identity leases of apiservers that are gone")
	fs.DurationVar(&o.staleLeaseAfter, "stale-lease-after", verify.DefaultStaleLeaseAfter, "how long an identity lease must go unrenewed to be stale")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the whole verification may take")
}

// complete loads the kubeconfig and builds one target per --apiserver.
func (o *upgradeVerifyOptions) complete(getenv func(string) string) error {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig}
	if o.kubeconfig == "" {
		rules.Precedence = []string{clientcmd.RecommendedHomeFile}
		if env := getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
			rules.Precedence = filepath.SplitList(env)
		}
	}
	base, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	var errs []error
	for _, a := range o.apiservers {
		name, u, err := parseAPIServer(a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cfg := rest.CopyConfig(base)
		cfg.Host = u
		if o.tlsServerName != "" {
			cfg.ServerName = o.tlsServerName
		}
		if cfg.Timeout == 0 {
			cfg.Timeout = 30 * time.Second
		}
		o.targets = append(o.targets, verify.Target{Name: name, Config: cfg})
	}
	o.verify = verify.Options{
		Namespace:         o.namespace,
		RemoveStaleLeases: o.removeStaleLeases,
		StaleLeaseAfter:   o.staleLeaseAfter,
	}
	if o.probeApps {
		o.verify.CRDs = []verify.CRDProbe{verify.AppProbe()}
	}
	for _, a := range o.aggregated {
		parts := strings.Split(a, "/")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			errs = append(errs, fmt.Errorf("--aggregated %q: want GROUP/VERSION/RESOURCE", a))
			continue
		}
		o.verify.Aggregated = append(o.verify.Aggregated, schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]})
	}
	return errors.Join(errs...)
}

// parseAPIServer reads URL or NAME=URL; the name defaults to the URL's
// host:port.
func parseAPIServer(s string) (name, rawURL string, err error) {
	name, rawURL, named := strings.Cut(s, "=")
	if !named {
		rawURL = s
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return "", "", fmt.Errorf("--apiserver %q: want https://HOST:PORT or NAME=https://HOST:PORT", s)
	}
	if !named {
		name = u.Host
	}
	return name, rawURL, nil
}

func (o *upgradeVerifyOptions) validate() error {
	if len(o.apiservers) == 0 {
		return errors.New("give each apiserver of the control plane with --apiserver URL (their own addresses, not the load balancer's)")
	}
	if o.timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	return nil
}

func (o *upgradeVerifyOptions) run(ctx context.Context) (verify.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return verify.Run(ctx, o.targets, o.verify)
}

func newUpgradeVerifyCommand(st *state) *cobra.Command {
	o := &upgradeVerifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify --kubeconfig FILE --apiserver URL [--apiserver URL ...]",
		Short: "Probe each apiserver of a mixed-version control plane directly and say whether tenants' requests would work",
		Long: "verify asks every apiserver given, directly, for the resources only its peers serve (which the Mixed Version\n" +
			"Proxy must forward), creates and deletes a probe App (a CRD is never proxied), lists the aggregated APIs given,\n" +
			"compares each server's merged and local discovery, reads its proxy counters and finds identity leases of\n" +
			"apiservers that are gone. It exits 1 when a probe failed or something was found.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return command.Usage(err)
			}
			if err := o.complete(st.io.Getenv); err != nil {
				return err
			}
			rep, err := o.run(cmd.Context())
			if err != nil {
				return err
			}
			if err := st.render(verifyResult{Passed: rep.Passed(), Report: rep}, func(w io.Writer) error { return renderVerifyReport(w, rep) }); err != nil {
				return err
			}
			if !rep.Passed() {
				return fmt.Errorf("%w: %s", ErrVerificationFailed, verdictSummary(rep))
			}
			return nil
		},
	}
	o.addFlags(cmd.Flags())
	return cmd
}

// verifyResult is what -o json prints: the report and the verdict.
type verifyResult struct {
	Passed bool `json:"passed"`
	verify.Report
}

// renderVerifyReport writes the probes as a table, then the discovery
// comparison, the counter deltas, the leases, the findings, the evidence
// of failed probes and the verdict.
func renderVerifyReport(w io.Writer, rep verify.Report) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	section := func(title string, header string) {
		fmt.Fprintf(tw, "\n%s\n%s\n", title, header)
	}
	fmt.Fprintln(tw, "APISERVER\tRESOURCE\tVERB\tSTATUS\tOUTCOME")
	for _, p := range rep.Probes {
		status := "-"
		if p.Status != 0 {
			status = strconv.Itoa(p.Status)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.APIServer, verify.GVRString(p.Resource), p.Verb, status, p.Outcome)
	}
	section("Discovery (merged minus local: what each apiserver proxies):", "APISERVER\tPROXIES\tMISSING\tFROM UNKNOWN PEERS")
	for _, d := range rep.Discovery {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", d.APIServer, len(d.Proxies), len(d.Missing), len(d.FromUnknownPeers))
	}
	section("Proxy counters (rise during the probes):", "APISERVER\tREROUTED\tPEER PROXY ERRORS\tPEER DISCOVERY SYNC ERRORS")
	for _, m := range rep.Metrics {
		if m.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t(%s)\n", m.APIServer, m.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%g\t%g\t%g\n", m.APIServer, m.Rerouted, m.PeerProxyErrors, m.PeerDiscoverySyncErrors)
	}
	section("Identity leases:", "LEASE\tHOSTNAME\tUNRENEWED\tSTATE")
	for _, l := range rep.Leases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Name, orDash(l.Hostname), l.Unrenewed.Duration.Round(time.Second), leaseState(l))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.Findings) > 0 {
		fmt.Fprintln(w, "\nFindings:")
		for _, f := range rep.Findings {
			fmt.Fprintf(w, "  %s: %s\n", f.Reason, f.Message)
		}
	}
	if failures := rep.Failures(); len(failures) > 0 {
		fmt.Fprintln(w, "\nFailed probes:")
		for _, p := range failures {
			fmt.Fprintf(w, "  %s %s %s: %s %s\n", p.APIServer, p.Verb, verify.GVRString(p.Resource), p.Outcome, orDash(p.Message))
		}
	}
	verdict := "PASS: " + verdictSummary(rep)
	if !rep.Passed() {
		verdict = "FAIL: " + verdictSummary(rep)
	}
	_, err := fmt.Fprintf(w, "\n%s\n", verdict)
	return err
}

func leaseState(l verify.Lease) string {
	switch {
	case l.Stale && l.Removed:
		return "stale, removed"
	case l.Stale && l.Error != "":
		return "stale, removal failed: " + l.Error
	case l.Stale:
		return "stale"
	case l.Target != "":
		return "live (" + l.Target + ")"
	}
	return "live"
}

// verdictSummary says what passed, or which servers failed on what.
func verdictSummary(rep verify.Report) string {
	servers := map[string]bool{}
	for _, p := range rep.Probes {
		servers[p.APIServer] = true
	}
	failures := rep.Failures()
	if len(failures) == 0 && len(rep.Findings) == 0 {
		return fmt.Sprintf("%d probes on %d apiservers, none failed", len(rep.Probes), len(servers))
	}
	var order []string
	byServer := map[string][]string{}
	for _, p := range failures {
		if _, ok := byServer[p.APIServer]; !ok {
			order = append(order, p.APIServer)
		}
		byServer[p.APIServer] = append(byServer[p.APIServer], fmt.Sprintf("%s %s %s", p.Outcome, p.Verb, verify.GVRString(p.Resource)))
	}
	parts := []string{fmt.Sprintf("%d of %d probes failed", len(failures), len(rep.Probes))}
	for _, s := range order {
		parts = append(parts, s+": "+strings.Join(byServer[s], ", "))
	}
	if len(rep.Findings) > 0 {
		parts = append(parts, fmt.Sprintf("findings: %d", len(rep.Findings)))
	}
	return strings.Join(parts, "; ")
}
