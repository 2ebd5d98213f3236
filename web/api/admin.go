package api

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// firstTokenName names the token made with a tenant.
const firstTokenName = "initial"

// tenantName is the form of a tenant's name: a DNS label, as the store and
// Kubernetes namespaces want it.
var tenantName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// validateTenantName says what is wrong with name as a tenant's name.
func validateTenantName(name string) error {
	switch {
	case !tenantName.MatchString(name):
		return invalid("name", "tenant name %q: must be a DNS label: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit", name)
	case name == "default" || strings.HasPrefix(name, "kube-") || strings.HasPrefix(name, "bex-system"):
		return invalid("name", "tenant name %q is reserved for the cluster", name)
	}
	return nil
}

func (s *Server) listTenants(c echo.Context) error {
	tenants, err := s.store.ListTenants(c.Request().Context())
	if err != nil {
		return err
	}
	views := make([]apiclient.Tenant, 0, len(tenants))
	for _, t := range tenants {
		views = append(views, apiclient.Tenant{Name: t.Name, CreatedAt: t.CreatedAt.UTC()})
	}
	return c.JSON(http.StatusOK, views)
}

// createTenant creates the tenant's namespace, then its row, then its first
// token. A name taken in either place is refused before anything is
// written.
func (s *Server) createTenant(c echo.Context) error {
	var req apiclient.CreateTenantRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	if err := validateTenantName(req.Name); err != nil {
		return err
	}
	ctx := c.Request().Context()
	taken := &httpError{status: http.StatusConflict, field: "name", message: fmt.Sprintf("tenant %q exists already", req.Name)}
	if _, err := s.store.GetTenantByName(ctx, req.Name); err == nil {
		return taken
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: req.Name, Labels: map[string]string{TenantLabel: req.Name}}}
	if err := s.kube.Create(ctx, ns); apierrors.IsAlreadyExists(err) {
		return &httpError{status: http.StatusConflict, field: "name", message: fmt.Sprintf("namespace %q exists in the cluster already: choose another tenant name", req.Name)}
	} else if err != nil {
		return fmt.Errorf("creating namespace %s: %w", req.Name, err)
	}
	t, err := s.store.CreateTenant(ctx, req.Name)
	if err != nil {
		if derr := s.kube.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); derr != nil {
			s.log.Error(derr, "Removing namespace of a tenant not created failed", "namespace", req.Name)
		}
		if errors.Is(err, store.ErrConflict) {
			return taken
		}
		return err
	}
	secret, tok, err := s.store.CreateToken(ctx, t.ID, "", firstTokenName)
	if err != nil {
		return fmt.Errorf("creating the first token of tenant %s: %w", t.Name, err)
	}
	s.audit(c, "tenant.create", t.Name, map[string]any{"tenantID": t.ID, "firstTokenID": tok.ID})
	return c.JSON(http.StatusCreated, apiclient.CreatedTenant{
		Tenant: apiclient.Tenant{Name: t.Name, CreatedAt: t.CreatedAt.UTC()},
		Token:  secret,
	})
}
