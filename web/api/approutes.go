package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// Custom hostnames: an app's Routes.
//
// A hostname belongs to one tenant, which proves it owns it with a DNS TXT
// record (package domains): the answer to adding a route carries the
// record to create. The API refuses the platform's own names and public
// suffixes (and wildcards over them), and a hostname that another tenant
// has verified (or that a verified wildcard of another tenant's covers, or
// whose wildcard covers one of theirs) without saying whose it is; a
// Route of another tenant that is not verified holds nothing, so it does
// not block the name's owner. Within a tenant the same hostname may route
// different path prefixes to different apps, but a hostname and path
// prefix go to one app. Two requests that race past these checks both
// create their Route: the Route controller decides by the same rule and
// tells the loser why.

const (
	// maxHostname is the longest DNS name.
	maxHostname = 253
	// maxPathPrefix is the longest path prefix the Route CRD accepts.
	maxPathPrefix = 1024
	// routeHashLen is how many hex digits of a hash end a Route's name.
	routeHashLen = 10
)

// hostnameForm is the form of a Route's spec.hostname, as the CRD checks it.
var hostnameForm = regexp.MustCompile(`^([*][.])?[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`)

// normalizeHostname lowercases a hostname the way a tenant may type it
// (Www.Example.com.) and says what is wrong with it, as a 422 on field.
func normalizeHostname(field, raw string) (string, error) {
	host := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(raw)), ".")
	switch {
	case host == "":
		return "", invalid(field, "a route needs a hostname, such as www.example.com")
	case len(host) > maxHostname:
		return "", invalid(field, "hostname %q: longer than %d characters", raw, maxHostname)
	case net.ParseIP(host) != nil:
		return "", invalid(field, "hostname %q: an IP address is not a hostname: use a DNS name that points at the platform", raw)
	case !hostnameForm.MatchString(host):
		return "", invalid(field, "hostname %q: must be a DNS name of at least two labels, such as www.example.com: "+
			"labels of a-z, 0-9 and '-' that start and end with a letter or digit, separated by single dots; "+
			"a wildcard is allowed only as a leading '*.', such as *.example.com", raw)
	}
	for _, l := range strings.Split(host, ".") {
		if len(l) > maxHostLabel {
			return "", invalid(field, "hostname %q: label %q is longer than %d characters", raw, l, maxHostLabel)
		}
	}
	return host, nil
}

// validatePathPrefix says what is wrong with a route's path prefix; ""
// means "/".
func validatePathPrefix(p string) (string, error) {
	switch {
	case p == "":
		return "/", nil
	case !strings.HasPrefix(p, "/"):
		return "", invalid("pathPrefix", "path prefix %q: must start with '/'", p)
	case len(p) > maxPathPrefix:
		return "", invalid("pathPrefix", "path prefix: longer than %d characters", maxPathPrefix)
	case strings.ContainsAny(p, "?# \t\r\n"):
		return "", invalid("pathPrefix", "path prefix %q: a path only: no spaces, '?' or '#'", p)
	}
	return p, nil
}

// parseTLSMode reads the tls field of a request: Auto (the default) or
// None, in any case.
func parseTLSMode(v string) (platformv1alpha1.TLSMode, error) {
	switch {
	case v == "" || strings.EqualFold(v, string(platformv1alpha1.TLSModeAuto)):
		return platformv1alpha1.TLSModeAuto, nil
	case strings.EqualFold(v, string(platformv1alpha1.TLSModeNone)):
		return platformv1alpha1.TLSModeNone, nil
	case strings.EqualFold(v, string(platformv1alpha1.TLSModeSecret)):
		return "", invalid("tls", "tls Secret: a certificate of your own is set up by the operator; use Auto (a certificate is obtained for you) or None")
	}
	return "", invalid("tls", "tls %q: want Auto (a certificate is obtained for you) or None (plain HTTP)", v)
}

// appDomainHost is the domain of default hostnames without a port:
// AppDomain may be localhost:8080.
func (s *Server) appDomainHost() string {
	d := s.appDomain
	if h, _, err := net.SplitHostPort(d); err == nil {
		d = h
	}
	return strings.Trim(strings.ToLower(d), ".")
}

// checkHostnamePolicy refuses a hostname in the space of default
// hostnames, <app>-<tenant>.<domain> (those belong to apps already), the
// platform's reserved names, and public suffixes and wildcards over them.
func (s *Server) checkHostnamePolicy(host string) error {
	d := s.appDomainHost()
	if host == d || strings.HasSuffix(host, "."+d) || domains.WildcardCovers(host, d) {
		return invalid("hostname", "hostname %q: names under %s are the platform's default hostnames (<app>-<tenant>.%s) and cannot be added: use a domain of your own", host, d, d)
	}
	if r := s.hostnamePolicy().Check(host); r != nil {
		return invalid("hostname", "hostname %q: %s", host, r.Message)
	}
	return nil
}

// hostnamePolicy is the platform's rule for hostnames, as the Route
// controller applies it.
func (s *Server) hostnamePolicy() domains.Policy {
	return domains.Policy{AppDomain: s.appDomain, Reserved: s.reservedHosts}
}

// routeObjectName is the name of the Route object for hostname and path
// prefix in a tenant's namespace: readable, a valid DNS-1123 subdomain, and
// distinct for distinct pairs.
func routeObjectName(host, pathPrefix string) string {
	sum := sha256.Sum256([]byte(host + " " + pathPrefix))
	hash := hex.EncodeToString(sum[:])[:routeHashLen]
	base := strings.ReplaceAll(host, "*", "wildcard")
	base = strings.TrimRight(base[:min(len(base), maxHostname-1-routeHashLen)], ".-")
	return base + "-" + hash
}

// routeSpecFields maps the fields of a Route's spec to the request's.
var routeSpecFields = []struct{ spec, field string }{
	{"spec.hostname", "hostname"},
	{"spec.pathPrefix", "pathPrefix"},
	{"spec.tls", "tls"},
}

// invalidRouteField names the request field an Invalid answer of the
// apiserver is about; hostname when it names none the request has.
func invalidRouteField(err error) string {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Details == nil {
		return "hostname"
	}
	for _, c := range se.Status().Details.Causes {
		for _, f := range routeSpecFields {
			if strings.HasPrefix(c.Field, f.spec) {
				return f.field
			}
		}
	}
	return "hostname"
}

// deleteAppRoutes removes the Routes of a deleted app, so that its
// hostnames are free again.
func (s *Server) deleteAppRoutes(ctx context.Context, app *platformv1alpha1.App) error {
	var list platformv1alpha1.RouteList
	if err := s.kube.List(ctx, &list, client.InNamespace(app.Namespace)); err != nil {
		return fmt.Errorf("listing routes: %w", err)
	}
	var errs []error
	for i := range list.Items {
		if r := &list.Items[i]; r.Spec.AppRef.Name == app.Name {
			if err := s.kube.Delete(ctx, r); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting route %s: %w", r.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// appRoutes lists the Routes of app in its namespace, by hostname and path
// prefix.
func (s *Server) appRoutes(c echo.Context, app *platformv1alpha1.App) ([]platformv1alpha1.Route, error) {
	var list platformv1alpha1.RouteList
	if err := s.kube.List(c.Request().Context(), &list, client.InNamespace(app.Namespace)); err != nil {
		return nil, fmt.Errorf("listing routes: %w", err)
	}
	routes := slices.DeleteFunc(list.Items, func(r platformv1alpha1.Route) bool { return r.Spec.AppRef.Name != app.Name })
	slices.SortFunc(routes, func(a, b platformv1alpha1.Route) int {
		return cmp.Or(strings.Compare(a.Spec.Hostname, b.Spec.Hostname), strings.Compare(a.Spec.PathPrefix, b.Spec.PathPrefix))
	})
	return routes, nil
}

// conditionOrder is the order in which a route's conditions are shown.
var conditionOrder = []string{
	platformv1alpha1.RouteReadyCondition,
	platformv1alpha1.RouteAdmittedCondition,
	platformv1alpha1.RouteDomainVerifiedCondition,
	platformv1alpha1.RouteDNSReadyCondition,
	platformv1alpha1.RouteCertificateReadyCondition,
}

// routeView is what the API shows of a Route.
func (s *Server) routeView(r *platformv1alpha1.Route) apiclient.Route {
	v := apiclient.Route{
		Hostname:   r.Spec.Hostname,
		PathPrefix: cmp.Or(r.Spec.PathPrefix, "/"),
		App:        r.Spec.AppRef.Name,
		Process:    cmp.Or(r.Spec.Process, "web"),
		TLS:        string(cmp.Or(r.Spec.TLS.Mode, platformv1alpha1.TLSModeAuto)),
		Conditions: []apiclient.RouteCondition{},
		DNSTarget: apiclient.DNSTarget{
			CNAME:     r.Spec.AppRef.Name + "-" + r.Namespace + "." + s.appDomainHost(),
			Addresses: s.edgeAddrs,
		},
		CreatedAt: r.CreationTimestamp.UTC(),
		Verified:  meta.IsStatusConditionTrue(r.Status.Conditions, platformv1alpha1.RouteDomainVerifiedCondition),
	}
	if _, isDefault := s.hostnamePolicy().DefaultHostnameApp(r.Namespace, r.Spec.Hostname); !isDefault {
		v.Verification = &apiclient.DomainVerification{
			Type: "TXT", Name: domains.ChallengeName(r.Spec.Hostname), Value: domains.Token(s.appDomain, r.Namespace, r.Spec.Hostname),
		}
	}
	v.Status, v.StatusMessage = conditionInWords(r.Status.Conditions, platformv1alpha1.RouteReadyCondition, "ready")
	v.Ready = v.Status == "ready"
	conds := slices.Clone(r.Status.Conditions)
	rank := func(typ string) int {
		if i := slices.Index(conditionOrder, typ); i >= 0 {
			return i
		}
		return len(conditionOrder)
	}
	slices.SortStableFunc(conds, func(a, b metav1.Condition) int { return cmp.Compare(rank(a.Type), rank(b.Type)) })
	for _, cond := range conds {
		v.Conditions = append(v.Conditions, apiclient.RouteCondition{
			Type: cond.Type, Status: string(cond.Status), Reason: cond.Reason, Message: cond.Message,
			Since: cond.LastTransitionTime.UTC(),
		})
	}
	return v
}

func (s *Server) listRoutes(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	routes, err := s.appRoutes(c, app)
	if err != nil {
		return err
	}
	views := make([]apiclient.Route, 0, len(routes))
	for i := range routes {
		views = append(views, s.routeView(&routes[i]))
	}
	return c.JSON(http.StatusOK, views)
}

func (s *Server) addRoute(c echo.Context) error {
	var req apiclient.AddRouteRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	host, err := normalizeHostname("hostname", req.Hostname)
	if err != nil {
		return err
	}
	if err := s.checkHostnamePolicy(host); err != nil {
		return err
	}
	pathPrefix, err := validatePathPrefix(req.PathPrefix)
	if err != nil {
		return err
	}
	mode, err := parseTLSMode(req.TLS)
	if err != nil {
		return err
	}
	if err := s.checkHostnameFree(c, app, host, pathPrefix); err != nil {
		return err
	}
	r := &platformv1alpha1.Route{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: app.Namespace,
			Name:      routeObjectName(host, pathPrefix),
			Labels:    map[string]string{TenantLabel: app.Namespace, AppLabel: app.Name},
		},
		Spec: platformv1alpha1.RouteSpec{
			Hostname:   host,
			AppRef:     platformv1alpha1.AppReference{Name: app.Name},
			PathPrefix: pathPrefix,
			TLS:        platformv1alpha1.RouteTLS{Mode: mode},
		},
	}
	// Counting the routes and adding one under the tenant's lock: two adds
	// at the quota cannot both pass.
	err = s.store.WithTenantLock(c.Request().Context(), principalOf(c).tenant.ID, "routes", func(ctx context.Context) error {
		if err := s.checkRouteQuota(ctx, principalOf(c).tenant); err != nil {
			return err
		}
		return s.kube.Create(ctx, r)
	})
	if err != nil {
		var qe *store.QuotaError
		switch {
		case errors.As(err, &qe):
			return err
		case apierrors.IsAlreadyExists(err):
			return &httpError{status: http.StatusConflict, field: "hostname",
				message: fmt.Sprintf("%s%s is routed already: remove that route first", host, pathPrefix)}
		case apierrors.IsInvalid(err):
			return invalid(invalidRouteField(err), "the cluster refused the route: %v", err)
		}
		return fmt.Errorf("creating route %s: %w", r.Name, err)
	}
	s.audit(c, "route.add", app.Name, map[string]any{"hostname": host, "pathPrefix": pathPrefix, "tls": string(mode)})
	return c.JSON(http.StatusCreated, s.routeView(r))
}

// checkRouteQuota refuses one more route when the tenant has as many, over
// all its apps, as its routes quota allows.
func (s *Server) checkRouteQuota(ctx context.Context, tenant store.Tenant) error {
	q, err := s.quotas.For(ctx, s.store, tenant.ID)
	if err != nil {
		return err
	}
	var routes platformv1alpha1.RouteList
	if err := s.kube.List(ctx, &routes, client.InNamespace(tenant.Name)); err != nil {
		return fmt.Errorf("listing routes: %w", err)
	}
	if n := len(routes.Items); n >= q.Routes {
		return &store.QuotaError{Quota: "routes", Limit: fmt.Sprint(q.Routes),
			Detail: fmt.Sprintf("the tenant's apps have %d %s; remove one (bex routes remove HOSTNAME --app APP), or ask the operator to raise the quota", n, pluralize(n, "route", "routes"))}
	}
	return nil
}

// checkHostnameFree refuses host when another tenant's verified Route has
// it (or overlaps it with a wildcard), and host with pathPrefix when a Route of the
// tenant routes them already. The answer about another tenant does not say
// whose Route it is.
func (s *Server) checkHostnameFree(c echo.Context, app *platformv1alpha1.App, host, pathPrefix string) error {
	var all platformv1alpha1.RouteList
	if err := s.kube.List(c.Request().Context(), &all); err != nil {
		return fmt.Errorf("listing routes: %w", err)
	}
	for _, r := range all.Items {
		verified := meta.IsStatusConditionTrue(r.Status.Conditions, platformv1alpha1.RouteDomainVerifiedCondition)
		switch {
		case r.Namespace != app.Namespace && verified && domains.Overlap(r.Spec.Hostname, host):
			return &httpError{status: http.StatusConflict, field: "hostname",
				message: fmt.Sprintf("hostname %s is already in use by another tenant: if it is yours, remove it from the app that has it there, or use another hostname", host)}
		case r.Namespace == app.Namespace && r.Spec.Hostname == host && cmp.Or(r.Spec.PathPrefix, "/") == pathPrefix:
			return &httpError{status: http.StatusConflict, field: "hostname",
				message: fmt.Sprintf("%s%s routes to app %s already: remove it there first (bex routes remove %s --app %s --path %s)",
					host, pathPrefix, r.Spec.AppRef.Name, host, r.Spec.AppRef.Name, pathPrefix)}
		}
	}
	return nil
}

func (s *Server) removeRoute(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	raw, err := url.PathUnescape(c.Param("hostname"))
	if err != nil {
		return badRequest("hostname %q: %v", c.Param("hostname"), err)
	}
	host := strings.TrimSuffix(strings.ToLower(raw), ".")
	pathPrefix := cmp.Or(c.QueryParam("pathPrefix"), "/")
	routes, err := s.appRoutes(c, app)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(routes, func(r platformv1alpha1.Route) bool {
		return r.Spec.Hostname == host && cmp.Or(r.Spec.PathPrefix, "/") == pathPrefix
	})
	if i < 0 {
		return notFound("app %q has no route for %s%s", app.Name, host, pathPrefix)
	}
	r := &routes[i]
	if err := s.kube.Delete(c.Request().Context(), r, client.Preconditions{UID: &r.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting route %s: %w", r.Name, err)
	}
	s.audit(c, "route.remove", app.Name, map[string]any{"hostname": host, "pathPrefix": pathPrefix})
	return c.NoContent(http.StatusNoContent)
}
