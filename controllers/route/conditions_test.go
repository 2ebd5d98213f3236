package route

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/edge"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newRoute(host string, mode platformv1alpha1.TLSMode) *platformv1alpha1.Route {
	return &platformv1alpha1.Route{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "r", Generation: 2},
		Spec: platformv1alpha1.RouteSpec{
			Hostname: host, AppRef: platformv1alpha1.AppReference{Name: "web"}, Process: "web", PathPrefix: "/",
			TLS: platformv1alpha1.RouteTLS{Mode: mode},
		},
	}
}

// wantCondition fails t unless the Route has the condition with status,
// reason and a message containing each of substrs, and none of absent.
func wantCondition(t *testing.T, rt *platformv1alpha1.Route, typ string, status metav1.ConditionStatus, reason string, substrs []string, absent ...string) {
	t.Helper()
	c := meta.FindStatusCondition(rt.Status.Conditions, typ)
	if c == nil || c.Status != status || c.Reason != reason {
		t.Fatalf("%s = %+v, want %s/%s", typ, c, status, reason)
	}
	if c.ObservedGeneration != rt.Generation {
		t.Errorf("%s.observedGeneration = %d, want %d", typ, c.ObservedGeneration, rt.Generation)
	}
	for _, sub := range substrs {
		if !strings.Contains(c.Message, sub) {
			t.Errorf("%s message %q does not say %q", typ, c.Message, sub)
		}
	}
	for _, a := range absent {
		if strings.Contains(c.Message, a) {
			t.Errorf("%s message %q must not say %q", typ, c.Message, a)
		}
	}
}

func TestSetAdmittedCondition(t *testing.T) {
	app := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "web"}}
	withWorker := app.DeepCopy()
	withWorker.Spec.Processes = []platformv1alpha1.Process{{Name: "worker"}}
	older := newRoute("www.example.com", platformv1alpha1.TLSModeAuto)
	older.Name, older.Spec.AppRef.Name = "www-old", "shop"
	for _, tc := range []struct {
		name    string
		s       scope
		status  metav1.ConditionStatus
		reason  string
		says    []string
		absent  []string
		process string
	}{
		{name: "admitted", s: scope{app: app, verified: true}, status: metav1.ConditionTrue, reason: platformv1alpha1.RouteAcceptedReason,
			says: []string{"www.example.com routes to process web of app web"}},
		{name: "other tenant first", s: scope{app: app, verified: true, claimedByOtherTenant: true}, status: metav1.ConditionFalse,
			reason: platformv1alpha1.RouteHostnameClaimedReason, says: []string{"is taken", "already in use by another tenant", "_bex-challenge.www.example.com", "remove that tenant's value", "use another hostname"}},
		{name: "other tenant's wildcard first", s: scope{app: app, verified: true, claimedByOtherTenant: true, otherClaim: "*.example.com"}, status: metav1.ConditionFalse,
			reason: platformv1alpha1.RouteHostnameClaimedReason, says: []string{"www.example.com is taken", "another tenant holds *.example.com, which overlaps it", "_bex-challenge.example.com", "use another hostname"},
			absent: []string{"_bex-challenge.www.example.com"}},
		{name: "other tenant verified, this one not", s: scope{app: app, claimedByOtherTenant: true}, status: metav1.ConditionFalse,
			reason: platformv1alpha1.RouteHostnameClaimedReason, says: []string{"is taken"}},
		{name: "not verified", s: scope{app: app}, status: metav1.ConditionFalse, reason: platformv1alpha1.RouteDomainNotVerifiedReason,
			says: []string{"Not served until the domain is verified"}},
		{name: "reserved wins over everything", s: scope{app: app, verified: true, claimedByOtherTenant: true, refusal: &domains.Refusal{Reason: domains.ReasonReserved, Message: "apps.example.com is the platform's own"}},
			status: metav1.ConditionFalse, reason: platformv1alpha1.RouteHostnameReservedReason, says: []string{"cannot be used: apps.example.com is the platform's own"}},
		{name: "older route of the tenant", s: scope{app: app, verified: true, olderSibling: older}, status: metav1.ConditionFalse,
			reason: platformv1alpha1.RouteHostnameClaimedReason, says: []string{"Route www-old", "to app shop", "remove one of the two"}},
		{name: "claim wins over a missing app", s: scope{verified: true, claimedByOtherTenant: true}, status: metav1.ConditionFalse,
			reason: platformv1alpha1.RouteHostnameClaimedReason},
		{name: "no app", s: scope{verified: true}, status: metav1.ConditionFalse, reason: platformv1alpha1.RouteAppNotFoundReason,
			says: []string{`App "web" does not exist`}},
		{name: "no such process", s: scope{app: withWorker, verified: true}, status: metav1.ConditionFalse, reason: platformv1alpha1.RouteAppNotFoundReason,
			says: []string{`has no process "web"`, "(worker)"}},
		{name: "listed process", s: scope{app: withWorker, verified: true}, process: "worker", status: metav1.ConditionTrue, reason: platformv1alpha1.RouteAcceptedReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			s.route = newRoute("www.example.com", platformv1alpha1.TLSModeAuto)
			if tc.process != "" {
				s.route.Spec.Process = tc.process
			}
			setAdmittedCondition(&s)
			wantCondition(t, s.route, platformv1alpha1.RouteAdmittedCondition, tc.status, tc.reason, tc.says, tc.absent...)
		})
	}
}

func TestSetDomainVerifiedCondition(t *testing.T) {
	const token = "bex-verify=abc"
	for _, tc := range []struct {
		name   string
		host   string
		s      scope
		before metav1.ConditionStatus
		status metav1.ConditionStatus
		reason string
		says   []string
	}{
		{name: "no record", host: "www.example.com", s: scope{}, status: metav1.ConditionFalse, reason: platformv1alpha1.RouteAwaitingTXTRecordReason,
			says: []string{"create a DNS TXT record _bex-challenge.www.example.com with the value bex-verify=abc", "no TXT record yet"}},
		{name: "other values", host: "*.example.co.uk", s: scope{txtValues: []string{"bex-verify=other"}}, status: metav1.ConditionFalse, reason: platformv1alpha1.RouteAwaitingTXTRecordReason,
			says: []string{"_bex-challenge.example.co.uk with the value bex-verify=abc", "hold bex-verify=other, not this tenant's value"}},
		{name: "found", host: "www.example.com", s: scope{verified: true, txtValues: []string{token}}, status: metav1.ConditionTrue, reason: platformv1alpha1.RouteTXTRecordFoundReason,
			says: []string{"_bex-challenge.www.example.com holds this tenant's value bex-verify=abc", "Keep the record"}},
		{name: "lookup failed", host: "www.example.com", s: scope{txtErr: errors.New("i/o timeout")}, status: metav1.ConditionUnknown, reason: platformv1alpha1.RouteTXTLookupFailedReason,
			says: []string{"failed (i/o timeout)", "_bex-challenge.www.example.com with the value bex-verify=abc"}},
		{name: "lookup failed once verified", host: "www.example.com", s: scope{verified: true, txtErr: errors.New("i/o timeout")}, status: metav1.ConditionTrue, reason: platformv1alpha1.RouteTXTRecordFoundReason,
			says: []string{"the last look-up failed (i/o timeout)", "keep the record"}},
		{name: "default hostname", host: "web-acme.apps.example.com", s: scope{defaultApp: "web", verified: true}, status: metav1.ConditionTrue, reason: platformv1alpha1.RouteDefaultHostnameReason,
			says: []string{"default hostname of app web of this tenant", "no TXT record is needed"}},
		{name: "default hostname of no app", host: "web-acme.apps.example.com", s: scope{defaultApp: "web"}, status: metav1.ConditionFalse, reason: platformv1alpha1.RouteDefaultHostnameReason,
			says: []string{"app web, which does not exist"}},
		{name: "public suffix", host: "*.co.uk", s: scope{refusal: &domains.Refusal{Reason: domains.ReasonNotRegistrable, Message: "*.co.uk is a wildcard over co.uk"}},
			status: metav1.ConditionFalse, reason: platformv1alpha1.RouteHostnameNotRegistrableReason, says: []string{"cannot be used: *.co.uk is a wildcard over co.uk"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			s.token = token
			s.route = newRoute(tc.host, platformv1alpha1.TLSModeAuto)
			setDomainVerifiedCondition(&s)
			wantCondition(t, s.route, platformv1alpha1.RouteDomainVerifiedCondition, tc.status, tc.reason, tc.says)
		})
	}
}

func TestSetDNSReadyCondition(t *testing.T) {
	edges := []string{"192.0.2.10", "2001:db8::10"}
	for _, tc := range []struct {
		name      string
		host      string
		resolved  []string
		err       error
		cname     string
		unchecked bool
		status    metav1.ConditionStatus
		says      []string
	}{
		{name: "points here", host: "www.example.com", resolved: []string{"192.0.2.10"}, status: metav1.ConditionTrue,
			says: []string{"www.example.com resolves to 192.0.2.10, the platform's edge"}},
		{name: "both families, v6 written long", host: "www.example.com", resolved: []string{"192.0.2.10", "2001:0db8:0:0:0:0:0:10"}, status: metav1.ConditionTrue},
		{name: "v4 mapped in v6", host: "www.example.com", resolved: []string{"::ffff:192.0.2.10"}, status: metav1.ConditionTrue},
		{name: "elsewhere, with CNAME advice", host: "www.example.com", resolved: []string{"1.2.3.4"}, cname: "web-acme.apps.example.net", status: metav1.ConditionFalse,
			says: []string{"DNS not pointing here: www.example.com resolves to 1.2.3.4", "create a CNAME record for www.example.com to web-acme.apps.example.net", "A/AAAA records to 192.0.2.10, 2001:db8::10"}},
		{name: "elsewhere, A records only", host: "example.com", resolved: []string{"1.2.3.4"}, status: metav1.ConditionFalse,
			says: []string{"create A/AAAA records for example.com to 192.0.2.10, 2001:db8::10"}},
		{name: "partly elsewhere", host: "www.example.com", resolved: []string{"192.0.2.10", "1.2.3.4"}, status: metav1.ConditionFalse,
			says: []string{"resolves to 192.0.2.10, 1.2.3.4, and 1.2.3.4 is not the platform's edge"}},
		{name: "no such host", host: "www.example.com", err: &net.DNSError{Err: "no such host", Name: "www.example.com", IsNotFound: true}, status: metav1.ConditionFalse,
			says: []string{"www.example.com does not resolve", "create A/AAAA records"}},
		{name: "lookup failed", host: "www.example.com", err: &net.DNSError{Err: "i/o timeout", Name: "www.example.com", IsTimeout: true}, status: metav1.ConditionUnknown,
			says: []string{"Looking up www.example.com failed", "i/o timeout"}},
		{name: "wildcard probed", host: "*.example.com", resolved: []string{"1.2.3.4"}, status: metav1.ConditionFalse,
			says: []string{"*.example.com (looked up as bex-dns-probe.example.com) resolves to 1.2.3.4"}},
		{name: "not configured", host: "www.example.com", unchecked: true, status: metav1.ConditionUnknown, says: []string{"ask the operator"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scope{route: newRoute(tc.host, platformv1alpha1.TLSModeAuto), dnsChecked: !tc.unchecked, resolved: tc.resolved,
				lookupErr: tc.err, edgeAddresses: edges, cnameTarget: tc.cname, lookupName: tc.host}
			if rest, ok := strings.CutPrefix(tc.host, "*."); ok {
				s.lookupName = probeLabel + "." + rest
			}
			setDNSReadyCondition(s)
			reason := platformv1alpha1.RouteDNSNotPointingHereReason
			if tc.status == metav1.ConditionTrue {
				reason = platformv1alpha1.RouteDNSPointingHereReason
			}
			wantCondition(t, s.route, platformv1alpha1.RouteDNSReadyCondition, tc.status, reason, tc.says)
		})
	}
}

func TestSetCertificateReadyCondition(t *testing.T) {
	failure := &edge.CertificateFailure{At: now.Add(-time.Minute), Error: "acme: error: 403 :: urn:ietf:params:acme:error:unauthorized ::\n   Invalid response from http://www.example.com/.well-known/acme-challenge/x: 404"}
	long := &edge.CertificateFailure{At: now, Error: strings.Repeat("x", 2000)}
	refusal := &edge.CertificateRefusal{At: now.Add(-time.Minute), Name: "x21.example.com", Tenant: "acme", Budget: 20, Window: time.Hour, Until: now.Add(30 * time.Minute)}
	for _, tc := range []struct {
		name       string
		mode       platformv1alpha1.TLSMode
		unobserved bool
		cert       edge.CertificateState
		secret     string
		status     metav1.ConditionStatus
		reason     string
		says       []string
		absent     []string
	}{
		{name: "tls off", mode: platformv1alpha1.TLSModeNone, status: metav1.ConditionTrue, reason: platformv1alpha1.RouteTLSDisabledReason, says: []string{"plain HTTP"}},
		{name: "nothing yet", mode: platformv1alpha1.TLSModeAuto, status: metav1.ConditionFalse, reason: platformv1alpha1.RouteCertificatePendingReason,
			says: []string{"a certificate is obtained on the first HTTPS request to www.example.com once DNS points here"}},
		{name: "issued", mode: platformv1alpha1.TLSModeAuto, cert: edge.CertificateState{Issued: true, NotAfter: now.Add(60 * 24 * time.Hour)},
			status: metav1.ConditionTrue, reason: platformv1alpha1.RouteCertificateIssuedReason, says: []string{"valid until 2026-04-30T12:00:00Z"}},
		{name: "issued, renewal failed but time left", mode: platformv1alpha1.TLSModeAuto, cert: edge.CertificateState{Issued: true, NotAfter: now.Add(20 * 24 * time.Hour), Failure: failure},
			status: metav1.ConditionTrue, reason: platformv1alpha1.RouteCertificateIssuedReason, says: []string{"Renewing it failed", "unauthorized"}},
		{name: "expiring, renewal failed", mode: platformv1alpha1.TLSModeAuto, cert: edge.CertificateState{Issued: true, NotAfter: now.Add(time.Hour), Failure: failure},
			status: metav1.ConditionFalse, reason: platformv1alpha1.RouteChallengeFailedReason},
		{name: "expired, renewing", mode: platformv1alpha1.TLSModeAuto, cert: edge.CertificateState{Issued: true, NotAfter: now.Add(-time.Hour)},
			status: metav1.ConditionFalse, reason: platformv1alpha1.RouteCertificatePendingReason, says: []string{"expires at 2026-03-01T11:00:00Z"}},
		{name: "challenge failed", mode: platformv1alpha1.TLSModeAuto, cert: edge.CertificateState{Failure: failure},
			status: metav1.ConditionFalse, reason: platformv1alpha1.RouteChallengeFailedReason,
			says: []string{"failed at 2026-03-01T11:59:00Z: acme: error: 403 :: urn:ietf:params:acme:error:unauthorized :: Invalid response", "Check that DNS points here"}, absent: []string{"\n"}},
		{name: "long answer trimmed", mode: platformv1alpha1.TLSModeAuto, cert: edge.CertificateState{Failure: long},
			status: metav1.ConditionFalse, reason: platformv1alpha1.RouteChallengeFailedReason, says: []string{strings.Repeat("x", maxCAAnswer) + "…"}, absent: []string{strings.Repeat("x", maxCAAnswer+1)}},
		{name: "budget spent", mode: platformv1alpha1.TLSModeAuto, cert: edge.CertificateState{Refusal: refusal, Failure: failure},
			status: metav1.ConditionFalse, reason: platformv1alpha1.RouteIssuanceBudgetExhaustedReason,
			says: []string{"refused a certificate for x21.example.com at 2026-03-01T11:59:00Z", "tenant acme got certificates for 20 new names in the last 1h0m0s", "again from 2026-03-01T12:30:00Z", "--certificate-budget"}},
		{name: "budget spent, certificate issued", mode: platformv1alpha1.TLSModeAuto, cert: edge.CertificateState{Issued: true, NotAfter: now.Add(60 * 24 * time.Hour), Refusal: refusal},
			status: metav1.ConditionTrue, reason: platformv1alpha1.RouteCertificateIssuedReason},
		{name: "budget has room again", mode: platformv1alpha1.TLSModeAuto, cert: edge.CertificateState{Refusal: &edge.CertificateRefusal{Until: now}},
			status: metav1.ConditionFalse, reason: platformv1alpha1.RouteCertificatePendingReason},
		{name: "not observed", mode: platformv1alpha1.TLSModeAuto, unobserved: true, status: metav1.ConditionUnknown, reason: platformv1alpha1.RouteCertificatePendingReason},
		{name: "default mode is Auto", mode: "", status: metav1.ConditionFalse, reason: platformv1alpha1.RouteCertificatePendingReason},
		{name: "secret invalid", mode: platformv1alpha1.TLSModeSecret, secret: `Secret "tls" not found: create it`, status: metav1.ConditionFalse,
			reason: platformv1alpha1.RouteSecretInvalidReason, says: []string{`Secret "tls" not found`}},
		{name: "secret valid", mode: platformv1alpha1.TLSModeSecret, status: metav1.ConditionTrue, reason: platformv1alpha1.RouteCertificateIssuedReason, says: []string{`Secret "tls" holds a certificate`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRoute("www.example.com", tc.mode)
			if tc.mode == platformv1alpha1.TLSModeSecret {
				rt.Spec.TLS.SecretName = "tls"
			}
			s := &scope{route: rt, now: now, certObserved: !tc.unobserved, cert: tc.cert, secretProblem: tc.secret, secretNotAfter: now.Add(time.Hour)}
			setCertificateReadyCondition(s)
			wantCondition(t, rt, platformv1alpha1.RouteCertificateReadyCondition, tc.status, tc.reason, tc.says, tc.absent...)
		})
	}
}

func TestSetReadyCondition(t *testing.T) {
	app := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "web"}}
	edges := []string{"192.0.2.10"}
	issued := edge.CertificateState{Issued: true, NotAfter: now.Add(30 * 24 * time.Hour)}
	for _, tc := range []struct {
		name   string
		s      scope
		mode   platformv1alpha1.TLSMode
		status metav1.ConditionStatus
		reason string
		says   string
	}{
		{name: "all true", s: scope{verified: true, app: app, dnsChecked: true, resolved: edges, certObserved: true, cert: issued},
			status: metav1.ConditionTrue, reason: platformv1alpha1.RouteServingReason, says: "Serving https://www.example.com."},
		{name: "plain http", mode: platformv1alpha1.TLSModeNone, s: scope{verified: true, app: app, dnsChecked: true, resolved: edges},
			status: metav1.ConditionTrue, reason: platformv1alpha1.RouteServingReason, says: "Serving http://www.example.com."},
		{name: "first false named: admission", s: scope{verified: true, dnsChecked: true, resolved: []string{"1.2.3.4"}},
			status: metav1.ConditionFalse, reason: platformv1alpha1.RouteNotServingReason, says: "Admitted is False (AppNotFound)"},
		{name: "first false named: DNS", s: scope{verified: true, app: app, dnsChecked: true, resolved: []string{"1.2.3.4"}, certObserved: true},
			status: metav1.ConditionFalse, reason: platformv1alpha1.RouteNotServingReason, says: "DNSReady is False (DNSNotPointingHere): DNS not pointing here: www.example.com resolves to 1.2.3.4"},
		{name: "unverified is not ready", s: scope{token: "bex-verify=abc", app: app, dnsChecked: true, resolved: edges, certObserved: true, cert: issued},
			status: metav1.ConditionFalse, reason: platformv1alpha1.RouteNotServingReason,
			says: "Admitted is False (DomainNotVerified): Not served until the domain is verified: To prove www.example.com is yours, create a DNS TXT record _bex-challenge.www.example.com with the value bex-verify=abc"},
		{name: "unknown is not ready", s: scope{verified: true, app: app, dnsChecked: true, resolved: edges},
			status: metav1.ConditionFalse, reason: platformv1alpha1.RouteNotServingReason, says: "CertificateReady is Unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			s.route, s.now, s.edgeAddresses, s.lookupName = newRoute("www.example.com", cmpMode(tc.mode)), now, edges, "www.example.com"
			setConditions(&s)
			wantCondition(t, s.route, platformv1alpha1.RouteReadyCondition, tc.status, tc.reason, []string{tc.says})
			if got := isReady(s.route); got != (tc.status == metav1.ConditionTrue) {
				t.Errorf("isReady = %v", got)
			}
		})
	}
}

func cmpMode(m platformv1alpha1.TLSMode) platformv1alpha1.TLSMode {
	if m == "" {
		return platformv1alpha1.TLSModeAuto
	}
	return m
}

func TestRecheckAfter(t *testing.T) {
	ready := newRoute("www.example.com", platformv1alpha1.TLSModeAuto)
	meta.SetStatusCondition(&ready.Status.Conditions, metav1.Condition{Type: platformv1alpha1.RouteReadyCondition, Status: metav1.ConditionTrue, Reason: "Serving"})
	pending := newRoute("www.example.com", platformv1alpha1.TLSModeAuto)
	for _, tc := range []struct {
		name string
		r    Reconciler
		rt   *platformv1alpha1.Route
		want time.Duration
	}{
		{"pending", Reconciler{}, pending, DefaultPendingRecheck},
		{"ready", Reconciler{}, ready, DefaultReadyRecheck},
		{"pending, overridden", Reconciler{PendingRecheck: time.Second}, pending, time.Second},
	} {
		if got := tc.r.recheckAfter(tc.rt); got != tc.want {
			t.Errorf("%s: recheckAfter = %v, want %v", tc.name, got, tc.want)
		}
	}
	if DefaultPendingRecheck > 30*time.Second || DefaultReadyRecheck < 30*time.Minute {
		t.Errorf("rechecks %v/%v: want soon while pending, rarely once ready", DefaultPendingRecheck, DefaultReadyRecheck)
	}
}

func TestTrimAnswer(t *testing.T) {
	if got := trimAnswer("a\n  b\tc "); got != "a b c" {
		t.Errorf("trimAnswer = %q", got)
	}
	if got := trimAnswer(strings.Repeat("é", maxCAAnswer+5)); !strings.HasSuffix(got, "é…") || len([]rune(got)) != maxCAAnswer+1 {
		t.Errorf("trimAnswer of a long answer = %d runes", len([]rune(got)))
	}
}
