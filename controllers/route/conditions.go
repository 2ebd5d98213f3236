package route

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/domains"
)

const (
	// expiryMargin is how long before its expiry a certificate no longer
	// counts as ready: the edge renews well before.
	expiryMargin = 24 * time.Hour
	// maxCAAnswer is how much of the CA's answer a condition carries.
	maxCAAnswer = 400
	// timeFormat is how messages show times.
	timeFormat = time.RFC3339
)

// setConditions computes every condition of the Route from the scope.
func setConditions(s *scope) {
	setDomainVerifiedCondition(s)
	setAdmittedCondition(s)
	setDNSReadyCondition(s)
	setCertificateReadyCondition(s)
	setReadyCondition(s)
}

func setCondition(s *scope, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.route.Status.Conditions, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: s.route.Generation,
	})
}

// target is the hostname and path prefix a Route serves, as a tenant
// writes it.
func target(s *scope) string {
	if p := pathPrefix(s.route); p != "/" {
		return s.route.Spec.Hostname + p
	}
	return s.route.Spec.Hostname
}

func setAdmittedCondition(s *scope) {
	rt := s.route
	process := rt.Spec.Process
	if process == "" {
		process = "web"
	}
	switch {
	case s.refusal != nil:
		setCondition(s, platformv1alpha1.RouteAdmittedCondition, metav1.ConditionFalse, s.refusal.Reason, refusalMessage(s))
	case s.claimedByOtherTenant && s.otherClaim != "":
		setCondition(s, platformv1alpha1.RouteAdmittedCondition, metav1.ConditionFalse, platformv1alpha1.RouteHostnameClaimedReason,
			fmt.Sprintf("The hostname %s is taken: another tenant holds %s, which overlaps it (a wildcard covers every name one label below it), proved it owns it with a TXT record at %s, and its Route is older or was verified first. If the domain is yours, remove that tenant's value from the record (or ask the operator), or use another hostname.",
				rt.Spec.Hostname, s.otherClaim, domains.ChallengeName(s.otherClaim)))
	case s.claimedByOtherTenant:
		setCondition(s, platformv1alpha1.RouteAdmittedCondition, metav1.ConditionFalse, platformv1alpha1.RouteHostnameClaimedReason,
			fmt.Sprintf("The hostname %s is taken: it is already in use by another tenant, which proved it owns it with a TXT record at %s and whose Route is older or was verified first. If the domain is yours, remove that tenant's value from the record (or ask the operator), or use another hostname.",
				rt.Spec.Hostname, domains.ChallengeName(rt.Spec.Hostname)))
	case !s.verified:
		msg := "DomainVerified is not set"
		if c := meta.FindStatusCondition(rt.Status.Conditions, platformv1alpha1.RouteDomainVerifiedCondition); c != nil {
			msg = c.Message
		}
		setCondition(s, platformv1alpha1.RouteAdmittedCondition, metav1.ConditionFalse, platformv1alpha1.RouteDomainNotVerifiedReason,
			"Not served until the domain is verified: "+msg)
	case s.olderSibling != nil:
		setCondition(s, platformv1alpha1.RouteAdmittedCondition, metav1.ConditionFalse, platformv1alpha1.RouteHostnameClaimedReason,
			fmt.Sprintf("Route %s, which is older, already routes %s to app %s: remove one of the two.", s.olderSibling.Name, target(s), s.olderSibling.Spec.AppRef.Name))
	case s.app == nil:
		setCondition(s, platformv1alpha1.RouteAdmittedCondition, metav1.ConditionFalse, platformv1alpha1.RouteAppNotFoundReason,
			fmt.Sprintf("App %q does not exist in this namespace: create it, or point spec.appRef at an app that does.", rt.Spec.AppRef.Name))
	case !hasProcess(s.app, process):
		setCondition(s, platformv1alpha1.RouteAdmittedCondition, metav1.ConditionFalse, platformv1alpha1.RouteAppNotFoundReason,
			fmt.Sprintf("App %q has no process %q: route to one of its processes (%s).", rt.Spec.AppRef.Name, process, strings.Join(processNames(s.app), ", ")))
	default:
		setCondition(s, platformv1alpha1.RouteAdmittedCondition, metav1.ConditionTrue, platformv1alpha1.RouteAcceptedReason,
			fmt.Sprintf("%s routes to process %s of app %s.", target(s), process, rt.Spec.AppRef.Name))
	}
}

// refusalMessage is the message of a refused hostname.
func refusalMessage(s *scope) string {
	return fmt.Sprintf("The hostname cannot be used: %s.", s.refusal.Message)
}

func setDomainVerifiedCondition(s *scope) {
	rt := s.route
	host := rt.Spec.Hostname
	name, value := domains.ChallengeName(host), s.token
	record := fmt.Sprintf("create a DNS TXT record %s with the value %s", name, value)
	switch {
	case s.refusal != nil:
		setCondition(s, platformv1alpha1.RouteDomainVerifiedCondition, metav1.ConditionFalse, s.refusal.Reason, refusalMessage(s))
	case s.defaultApp != "" && s.verified:
		setCondition(s, platformv1alpha1.RouteDomainVerifiedCondition, metav1.ConditionTrue, platformv1alpha1.RouteDefaultHostnameReason,
			fmt.Sprintf("%s is the default hostname of app %s of this tenant: no TXT record is needed.", host, s.defaultApp))
	case s.defaultApp != "":
		setCondition(s, platformv1alpha1.RouteDomainVerifiedCondition, metav1.ConditionFalse, platformv1alpha1.RouteDefaultHostnameReason,
			fmt.Sprintf("%s is the default hostname of app %s, which does not exist in this namespace: create the app, or use a domain of your own.", host, s.defaultApp))
	case s.txtErr != nil && s.verified:
		setCondition(s, platformv1alpha1.RouteDomainVerifiedCondition, metav1.ConditionTrue, platformv1alpha1.RouteTXTRecordFoundReason,
			fmt.Sprintf("%s was verified by its TXT record %s; the last look-up failed (%v) and is tried again shortly: keep the record.", host, name, s.txtErr))
	case s.txtErr != nil:
		setCondition(s, platformv1alpha1.RouteDomainVerifiedCondition, metav1.ConditionUnknown, platformv1alpha1.RouteTXTLookupFailedReason,
			fmt.Sprintf("Looking up the TXT record of %s failed (%v); it is tried again shortly. To prove %s is yours, %s.", host, s.txtErr, host, record))
	case s.verified:
		setCondition(s, platformv1alpha1.RouteDomainVerifiedCondition, metav1.ConditionTrue, platformv1alpha1.RouteTXTRecordFoundReason,
			fmt.Sprintf("The TXT record %s holds this tenant's value %s: %s is verified. Keep the record: it is checked again from time to time.", name, value, host))
	default:
		found := "it has no TXT record yet"
		if len(s.txtValues) > 0 {
			found = fmt.Sprintf("its TXT records hold %s, not this tenant's value", strings.Join(s.txtValues, ", "))
		}
		setCondition(s, platformv1alpha1.RouteDomainVerifiedCondition, metav1.ConditionFalse, platformv1alpha1.RouteAwaitingTXTRecordReason,
			fmt.Sprintf("To prove %s is yours, %s (%s). It is looked up again every few seconds; DNS changes can take a while to be seen.", host, record, trimAnswer(found)))
	}
}

// processNames are the processes of app: those listed, or web alone.
func processNames(app *platformv1alpha1.App) []string {
	if len(app.Spec.Processes) == 0 {
		return []string{"web"}
	}
	names := make([]string, 0, len(app.Spec.Processes))
	for _, p := range app.Spec.Processes {
		names = append(names, p.Name)
	}
	return names
}

func hasProcess(app *platformv1alpha1.App, name string) bool {
	return slices.Contains(processNames(app), name)
}

// normalizeAddr writes an address the way comparisons need it: IPv4 in
// IPv6 unmapped, IPv6 compressed.
func normalizeAddr(a string) string {
	ip, err := netip.ParseAddr(a)
	if err != nil {
		return a
	}
	return ip.Unmap().String()
}

// dnsAdvice says which records to create for the hostname.
func dnsAdvice(s *scope) string {
	host, edges := s.route.Spec.Hostname, strings.Join(s.edgeAddresses, ", ")
	if s.cnameTarget == "" {
		return fmt.Sprintf("create A/AAAA records for %s to %s", host, edges)
	}
	return fmt.Sprintf("create a CNAME record for %s to %s (or, at the apex of a zone, A/AAAA records to %s)", host, s.cnameTarget, edges)
}

func setDNSReadyCondition(s *scope) {
	host := s.route.Spec.Hostname
	looked := host
	if s.lookupName != host {
		looked = fmt.Sprintf("%s (looked up as %s)", host, s.lookupName)
	}
	var dnsErr *net.DNSError
	switch {
	case !s.dnsChecked:
		setCondition(s, platformv1alpha1.RouteDNSReadyCondition, metav1.ConditionUnknown, platformv1alpha1.RouteDNSNotPointingHereReason,
			"DNS is not checked: the platform was configured without its edge's addresses; ask the operator.")
		return
	case errors.As(s.lookupErr, &dnsErr) && dnsErr.IsNotFound:
		setCondition(s, platformv1alpha1.RouteDNSReadyCondition, metav1.ConditionFalse, platformv1alpha1.RouteDNSNotPointingHereReason,
			fmt.Sprintf("DNS not pointing here: %s does not resolve: %s.", looked, dnsAdvice(s)))
		return
	case s.lookupErr != nil:
		setCondition(s, platformv1alpha1.RouteDNSReadyCondition, metav1.ConditionUnknown, platformv1alpha1.RouteDNSNotPointingHereReason,
			fmt.Sprintf("Looking up %s failed (%v); it is tried again shortly. If there is no record yet, %s.", looked, s.lookupErr, dnsAdvice(s)))
		return
	}
	edges := map[string]bool{}
	for _, a := range s.edgeAddresses {
		edges[normalizeAddr(a)] = true
	}
	var resolved, stray []string
	for _, a := range s.resolved {
		a = normalizeAddr(a)
		resolved = append(resolved, a)
		if !edges[a] {
			stray = append(stray, a)
		}
	}
	switch {
	case len(resolved) == 0:
		setCondition(s, platformv1alpha1.RouteDNSReadyCondition, metav1.ConditionFalse, platformv1alpha1.RouteDNSNotPointingHereReason,
			fmt.Sprintf("DNS not pointing here: %s has no addresses: %s.", looked, dnsAdvice(s)))
	case len(stray) == len(resolved):
		setCondition(s, platformv1alpha1.RouteDNSReadyCondition, metav1.ConditionFalse, platformv1alpha1.RouteDNSNotPointingHereReason,
			fmt.Sprintf("DNS not pointing here: %s resolves to %s: %s. DNS changes can take a while to be seen.", looked, strings.Join(resolved, ", "), dnsAdvice(s)))
	case len(stray) > 0:
		setCondition(s, platformv1alpha1.RouteDNSReadyCondition, metav1.ConditionFalse, platformv1alpha1.RouteDNSNotPointingHereReason,
			fmt.Sprintf("DNS not pointing only here: %s resolves to %s, and %s is not the platform's edge: remove the records to it.", looked, strings.Join(resolved, ", "), strings.Join(stray, ", ")))
	default:
		setCondition(s, platformv1alpha1.RouteDNSReadyCondition, metav1.ConditionTrue, platformv1alpha1.RouteDNSPointingHereReason,
			fmt.Sprintf("%s resolves to %s, the platform's edge.", looked, strings.Join(resolved, ", ")))
	}
}

// trimAnswer makes a CA's answer fit a condition message: one line, at
// most maxCAAnswer characters.
func trimAnswer(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= maxCAAnswer {
		return s
	}
	r := []rune(s)
	return string(r[:maxCAAnswer]) + "…"
}

func setCertificateReadyCondition(s *scope) {
	host := s.route.Spec.Hostname
	switch s.route.Spec.TLS.Mode {
	case platformv1alpha1.TLSModeNone:
		setCondition(s, platformv1alpha1.RouteCertificateReadyCondition, metav1.ConditionTrue, platformv1alpha1.RouteTLSDisabledReason,
			"spec.tls.mode is None: "+host+" is served over plain HTTP only.")
		return
	case platformv1alpha1.TLSModeSecret:
		if s.secretProblem != "" {
			setCondition(s, platformv1alpha1.RouteCertificateReadyCondition, metav1.ConditionFalse, platformv1alpha1.RouteSecretInvalidReason, s.secretProblem+".")
			return
		}
		setCondition(s, platformv1alpha1.RouteCertificateReadyCondition, metav1.ConditionTrue, platformv1alpha1.RouteCertificateIssuedReason,
			fmt.Sprintf("Secret %q holds a certificate for %s, valid until %s.", s.route.Spec.TLS.SecretName, host, s.secretNotAfter.UTC().Format(timeFormat)))
		return
	}
	cert, failure := s.cert, s.cert.Failure
	fresh := cert.Issued && cert.NotAfter.Sub(s.now) > expiryMargin
	switch {
	case !s.certObserved:
		setCondition(s, platformv1alpha1.RouteCertificateReadyCondition, metav1.ConditionUnknown, platformv1alpha1.RouteCertificatePendingReason,
			"Certificates are not checked: the platform was configured without access to the edge's certificate storage; ask the operator.")
	case fresh:
		msg := fmt.Sprintf("A certificate for %s is valid until %s.", host, cert.NotAfter.UTC().Format(timeFormat))
		if failure != nil {
			msg += fmt.Sprintf(" Renewing it failed at %s: %s", failure.At.UTC().Format(timeFormat), trimAnswer(failure.Error))
		}
		setCondition(s, platformv1alpha1.RouteCertificateReadyCondition, metav1.ConditionTrue, platformv1alpha1.RouteCertificateIssuedReason, msg)
	case cert.Refusal != nil && s.now.Before(cert.Refusal.Until):
		r := cert.Refusal
		setCondition(s, platformv1alpha1.RouteCertificateReadyCondition, metav1.ConditionFalse, platformv1alpha1.RouteIssuanceBudgetExhaustedReason,
			fmt.Sprintf("The edge refused a certificate for %s at %s: tenant %s got certificates for %d new names in the last %v, the most the platform allows; new names get certificates again from %s. A wildcard Route takes one certificate per name clients ask for: serve fewer names, or ask the operator for a larger budget (--certificate-budget).",
				r.Name, r.At.UTC().Format(timeFormat), r.Tenant, r.Budget, r.Window, r.Until.UTC().Format(timeFormat)))
	case failure != nil:
		setCondition(s, platformv1alpha1.RouteCertificateReadyCondition, metav1.ConditionFalse, platformv1alpha1.RouteChallengeFailedReason,
			fmt.Sprintf("Obtaining a certificate for %s failed at %s: %s. Check that DNS points here (DNSReady); the edge tries again on a later HTTPS request.",
				host, failure.At.UTC().Format(timeFormat), trimAnswer(failure.Error)))
	case cert.Issued:
		setCondition(s, platformv1alpha1.RouteCertificateReadyCondition, metav1.ConditionFalse, platformv1alpha1.RouteCertificatePendingReason,
			fmt.Sprintf("The certificate for %s expires at %s and is being renewed.", host, cert.NotAfter.UTC().Format(timeFormat)))
	default:
		setCondition(s, platformv1alpha1.RouteCertificateReadyCondition, metav1.ConditionFalse, platformv1alpha1.RouteCertificatePendingReason,
			fmt.Sprintf("No certificate yet: a certificate is obtained on the first HTTPS request to %s once DNS points here.", host))
	}
}

// readyInputs are the conditions Ready summarises, in the order a tenant
// fixes them.
var readyInputs = []string{
	platformv1alpha1.RouteAdmittedCondition,
	platformv1alpha1.RouteDNSReadyCondition,
	platformv1alpha1.RouteCertificateReadyCondition,
}

func setReadyCondition(s *scope) {
	for _, typ := range readyInputs {
		c := meta.FindStatusCondition(s.route.Status.Conditions, typ)
		if c == nil || c.Status != metav1.ConditionTrue {
			msg := typ + " is not set"
			if c != nil {
				msg = fmt.Sprintf("%s is %s (%s): %s", typ, c.Status, c.Reason, c.Message)
			}
			setCondition(s, platformv1alpha1.RouteReadyCondition, metav1.ConditionFalse, platformv1alpha1.RouteNotServingReason, msg)
			return
		}
	}
	scheme := "https://"
	if s.route.Spec.TLS.Mode == platformv1alpha1.TLSModeNone {
		scheme = "http://"
	}
	setCondition(s, platformv1alpha1.RouteReadyCondition, metav1.ConditionTrue, platformv1alpha1.RouteServingReason,
		"Serving "+scheme+target(s)+".")
}

// isReady reports whether the Route's Ready condition is True.
func isReady(rt *platformv1alpha1.Route) bool {
	return meta.IsStatusConditionTrue(rt.Status.Conditions, platformv1alpha1.RouteReadyCondition)
}
