package app

import (
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newRoutesCommand(st *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "routes",
		Short: "Add, list and remove an app's custom hostnames (www.example.com)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newRoutesAddCommand(st), newRoutesListCommand(st), newRoutesRemoveCommand(st))
	return cmd
}

// appClient checks the --app flag and returns the API client.
func (st *state) appClient(app string) (*apiclient.Client, error) {
	if app == "" {
		return nil, usagef("which app? add --app APP")
	}
	return st.needClient()
}

func newRoutesAddCommand(st *state) *cobra.Command {
	var app, path, tls string
	cmd := &cobra.Command{
		Use:   "add HOSTNAME --app APP",
		Short: "Serve a hostname of yours with an app, and print the DNS record to create",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.appClient(app)
			if err != nil {
				return err
			}
			r, err := c.AddRoute(cmd.Context(), app, apiclient.AddRouteRequest{Hostname: args[0], PathPrefix: path, TLS: tls})
			if err != nil {
				return explain(err)
			}
			return st.render(r, func(w io.Writer) error { return printRouteAdded(w, r) })
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "the app that serves the hostname")
	cmd.Flags().StringVar(&path, "path", "", "serve only request paths under this prefix (default /)")
	cmd.Flags().StringVar(&tls, "tls", "auto", "auto (a certificate is obtained for you) or none (plain HTTP)")
	return cmd
}

// printRouteAdded says what was added and which DNS record makes it work.
func printRouteAdded(w io.Writer, r apiclient.Route) error {
	if _, err := fmt.Fprintf(w, "Added %s%s to app %s (TLS %s).\n\n", r.Hostname, r.PathPrefix, r.App, r.TLS); err != nil {
		return err
	}
	if err := printVerification(w, r); err != nil {
		return err
	}
	if err := printDNSRecords(w, r); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nOnce the TXT record is found and DNS points here, %s. Follow it with:\n  bex routes list --app %s\n", afterDNS(r), r.App)
	return err
}

// printVerification writes the TXT record that proves the tenant owns the
// hostname; nothing for a name that needs none.
func printVerification(w io.Writer, r apiclient.Route) error {
	v := r.Verification
	if v == nil {
		return nil
	}
	_, err := fmt.Fprintf(w, "Prove the domain is yours: create this DNS record (keep it; the hostname is served only while it is there):\n  %s  %-5s  %s\n\n", v.Name, v.Type, v.Value)
	return err
}

// afterDNS says what happens once the DNS record is in place.
func afterDNS(r apiclient.Route) string {
	if r.TLS == "None" {
		return "the app answers at http://" + r.Hostname
	}
	return "a certificate is obtained on the first HTTPS request"
}

// printDNSRecords writes the records the hostname needs, as a DNS
// provider's form asks for them.
func printDNSRecords(w io.Writer, r apiclient.Route) error {
	record := func(typ, value string) string { return fmt.Sprintf("  %s  %-5s  %s\n", r.Hostname, typ, value) }
	var b strings.Builder
	b.WriteString("Create this DNS record at your DNS provider:\n")
	b.WriteString(record("CNAME", r.DNSTarget.CNAME))
	if len(r.DNSTarget.Addresses) > 0 {
		b.WriteString("or, at the apex of a zone (such as example.com), where a CNAME is not allowed:\n")
		for _, a := range r.DNSTarget.Addresses {
			typ := "A"
			if ip, err := netip.ParseAddr(a); err == nil && ip.Is6() && !ip.Is4In6() {
				typ = "AAAA"
			}
			b.WriteString(record(typ, a))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func newRoutesListCommand(st *state) *cobra.Command {
	var app string
	cmd := &cobra.Command{
		Use:   "list --app APP",
		Short: "List an app's hostnames and whether each is served: admitted, DNS, certificate",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := st.appClient(app)
			if err != nil {
				return err
			}
			routes, err := c.ListRoutes(cmd.Context(), app)
			if err != nil {
				return explain(err)
			}
			return st.render(routes, func(w io.Writer) error { return st.printRoutes(w, app, routes) })
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "the app whose hostnames to list")
	return cmd
}

// printRoutes writes one row per route and, under the table, what each
// route that is not served is waiting for.
func (st *state) printRoutes(w io.Writer, app string, routes []apiclient.Route) error {
	if len(routes) == 0 {
		_, err := fmt.Fprintf(w, "App %s has no custom hostnames: add one with bex routes add HOSTNAME --app %s\n", app, app)
		return err
	}
	rows := make([][]string, 0, len(routes))
	for _, r := range routes {
		rows = append(rows, []string{r.Hostname, r.PathPrefix, r.TLS, r.Status, conditionSummary(r)})
	}
	if err := st.table([]string{"HOSTNAME", "PATH", "TLS", "STATUS", "CONDITIONS"}, rows); err != nil {
		return err
	}
	for _, r := range routes {
		if r.Verification != nil && !r.Verified {
			if _, err := fmt.Fprintf(w, "\n%s: not verified: create the DNS record  %s  %s  %s\n", r.Hostname, r.Verification.Name, r.Verification.Type, r.Verification.Value); err != nil {
				return err
			}
		}
		if r.Ready || r.StatusMessage == "" {
			continue
		}
		if _, err := fmt.Fprintf(w, "\n%s%s: %s\n", r.Hostname, r.PathPrefix, r.StatusMessage); err != nil {
			return err
		}
	}
	return nil
}

// conditionSummary shows the conditions other than Ready as
// Type=Reason, such as "Admitted=Accepted DNSReady=DNSNotPointingHere".
func conditionSummary(r apiclient.Route) string {
	var parts []string
	for _, c := range r.Conditions {
		if c.Type == "Ready" {
			continue
		}
		parts = append(parts, c.Type+"="+c.Reason)
	}
	return orDash(strings.Join(parts, " "))
}

func newRoutesRemoveCommand(st *state) *cobra.Command {
	var app, path string
	cmd := &cobra.Command{
		Use:   "remove HOSTNAME --app APP",
		Short: "Stop serving a hostname with an app",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.appClient(app)
			if err != nil {
				return err
			}
			if err := c.RemoveRoute(cmd.Context(), app, args[0], path); err != nil {
				return explain(err)
			}
			shown := strings.ToLower(args[0]) + path
			return st.render(map[string]string{"removed": args[0], "pathPrefix": cmp.Or(path, "/"), "app": app}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Removed %s from app %s. Its DNS record can go too.\n", shown, app)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "the app that serves the hostname")
	cmd.Flags().StringVar(&path, "path", "", "the route's path prefix (default /)")
	return cmd
}
