package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

const (
	// maxAppName is the longest app name the App CRD accepts.
	maxAppName = 40
	// maxHostLabel is the longest DNS label: "<app>-<tenant>" must fit.
	maxHostLabel = 63
	// TenantLabel is set on every object the API creates to the tenant's
	// name.
	TenantLabel = "platform.bex.co/tenant"
	// AppLabel is set on objects that belong to an app, such as its env
	// Secret, to the app's name.
	AppLabel = "platform.bex.co/app"
)

var (
	// appName is the form of an App's name, as the CRD checks it.
	appName = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	// branchName is the form of AppSource.Branch, as the CRD checks it.
	branchName = regexp.MustCompile(`^[a-zA-Z0-9][-a-zA-Z0-9._/]*$`)
)

// validateAppName says what is wrong with name as the name of an app of
// tenant, or returns nil.
func validateAppName(name, tenant string) error {
	switch {
	case name == "":
		return invalid("name", "an app needs a name")
	case len(name) > maxAppName || !appName.MatchString(name):
		return invalid("name", "app name %q: must be at most %d lower-case letters, digits or '-', starting with a letter and ending with a letter or digit", name, maxAppName)
	case len(name)+1+len(tenant) > maxHostLabel:
		return invalid("name", "app name %q: too long for tenant %q: %q must fit in a DNS label of %d characters", name, tenant, name+"-"+tenant, maxHostLabel)
	}
	return nil
}

// getAppObject reads the caller's app named by the :app parameter; another
// tenant's app is not found, like one that does not exist.
func (s *Server) getAppObject(c echo.Context) (*platformv1alpha1.App, error) {
	name := c.Param("app")
	if len(name) > maxAppName || !appName.MatchString(name) {
		return nil, notFound("app %q not found", name)
	}
	app := &platformv1alpha1.App{}
	err := s.kube.Get(c.Request().Context(), client.ObjectKey{Namespace: principalOf(c).tenant.Name, Name: name}, app)
	if apierrors.IsNotFound(err) {
		return nil, notFound("app %q not found", name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading app %s: %w", name, err)
	}
	return app, nil
}

// appView is what the API shows of an App.
func (s *Server) appView(app *platformv1alpha1.App) apiclient.App {
	tenant := app.Namespace
	v := apiclient.App{
		Name:           app.Name,
		Tenant:         tenant,
		Branch:         app.Spec.Source.Branch,
		GitRemote:      s.gitBase + "/" + tenant + "/" + app.Name + ".git",
		URL:            "https://" + app.Name + "-" + tenant + "." + s.appDomain,
		CurrentRelease: app.Status.CurrentRelease,
		Cluster:        app.Status.Cluster,
		CreatedAt:      app.CreationTimestamp.UTC(),
	}
	if v.Branch == "" {
		v.Branch = "main"
	}
	v.Plan, v.Maintenance = planOf(app.Spec), app.Spec.Suspended
	v.MaintenancePageBytes = len(app.Spec.MaintenancePage)
	for _, pr := range app.Spec.Processes {
		if pr.Replicas != nil {
			if v.Processes == nil {
				v.Processes = map[string]int{}
			}
			v.Processes[pr.Name] = int(*pr.Replicas)
		}
	}
	if hc := app.Spec.HealthCheck; hc != nil {
		v.HealthCheck = &apiclient.HealthCheck{Path: hc.Path, TimeoutSeconds: int(hc.TimeoutSeconds), IntervalSeconds: int(hc.IntervalSeconds),
			SuccessThreshold: int(hc.SuccessThreshold), FailureThreshold: int(hc.FailureThreshold)}
		if hc.Port != nil {
			v.HealthCheck.Port = int(*hc.Port)
		}
	}
	v.Status, v.StatusMessage = conditionInWords(app.Status.Conditions, platformv1alpha1.AppReadyCondition, "ready")
	v.Placed, v.Placement = conditionInWords(app.Status.Conditions, platformv1alpha1.AppPlacedCondition, "placed")
	return v
}

// appDetail is what the API shows of one App: appView and its
// maintenance page, which a list of apps leaves out.
func (s *Server) appDetail(app *platformv1alpha1.App) apiclient.App {
	v := s.appView(app)
	v.MaintenancePage = app.Spec.MaintenancePage
	return v
}

// conditionInWords says how the condition typ of conds stands, in a word:
// word when it is True, "not " + word when it is False or Unknown,
// "pending" when there is none yet; and the condition's message.
func conditionInWords(conds []metav1.Condition, typ, word string) (string, string) {
	c := meta.FindStatusCondition(conds, typ)
	switch {
	case c == nil:
		return "pending", ""
	case c.Status == metav1.ConditionTrue:
		return word, c.Message
	}
	return "not " + word, c.Message
}

func (s *Server) listApps(c echo.Context) error {
	var apps platformv1alpha1.AppList
	if err := s.kube.List(c.Request().Context(), &apps, client.InNamespace(principalOf(c).tenant.Name)); err != nil {
		return fmt.Errorf("listing apps: %w", err)
	}
	views := make([]apiclient.App, 0, len(apps.Items))
	for i := range apps.Items {
		views = append(views, s.appView(&apps.Items[i]))
	}
	slices.SortFunc(views, func(a, b apiclient.App) int { return strings.Compare(a.Name, b.Name) })
	return c.JSON(http.StatusOK, views)
}

func (s *Server) getApp(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.appDetail(app))
}

func (s *Server) createApp(c echo.Context) error {
	var req apiclient.CreateAppRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	p := principalOf(c)
	if err := validateAppName(req.Name, p.tenant.Name); err != nil {
		return err
	}
	if req.Branch != "" {
		if err := checkBranch(req.Branch); err != nil {
			return err
		}
	}
	if err := s.checkDefaultHostname(c.Request().Context(), req.Name, p.tenant.Name); err != nil {
		return err
	}
	app := &platformv1alpha1.App{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.tenant.Name,
			Name:      req.Name,
			Labels:    map[string]string{TenantLabel: p.tenant.Name},
			// Set here, the App controller need not add it: one write
			// less per new App.
			Finalizers: []string{platformv1alpha1.AppFinalizer},
		},
		Spec: platformv1alpha1.AppSpec{
			Source: platformv1alpha1.AppSource{Branch: req.Branch},
		},
	}
	// Counting the apps and creating one under the tenant's lock: two
	// creates at the quota cannot both pass.
	err := s.store.WithTenantLock(c.Request().Context(), p.tenant.ID, "apps", func(ctx context.Context) error {
		if err := s.checkAppQuota(ctx, p.tenant); err != nil {
			return err
		}
		return s.kube.Create(ctx, app)
	})
	if err != nil {
		var qe *store.QuotaError
		if errors.As(err, &qe) {
			return err
		}
		if apierrors.IsAlreadyExists(err) {
			return &httpError{status: http.StatusConflict, field: "name", message: fmt.Sprintf("app %q exists already", req.Name)}
		}
		if apierrors.IsInvalid(err) {
			return invalid("name", "the cluster refused app %q: %v", req.Name, err)
		}
		return fmt.Errorf("creating app %s: %w", req.Name, err)
	}
	s.audit(c, "app.create", req.Name, map[string]any{"branch": app.Spec.Source.Branch})
	return c.JSON(http.StatusCreated, s.appView(app))
}

// checkAppQuota refuses one more app when the tenant has as many as its
// apps quota allows.
func (s *Server) checkAppQuota(ctx context.Context, tenant store.Tenant) error {
	q, err := s.quotas.For(ctx, s.store, tenant.ID)
	if err != nil {
		return err
	}
	var apps platformv1alpha1.AppList
	if err := s.kube.List(ctx, &apps, client.InNamespace(tenant.Name)); err != nil {
		return fmt.Errorf("listing apps: %w", err)
	}
	if n := len(apps.Items); n >= q.Apps {
		return &store.QuotaError{Quota: "apps", Limit: fmt.Sprint(q.Apps),
			Detail: fmt.Sprintf("the tenant has %d %s; delete one (bex apps delete NAME), or ask the operator to raise the quota", n, pluralize(n, "app", "apps"))}
	}
	return nil
}

// pluralize returns one when n is 1, else many.
func pluralize(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// checkDefaultHostname refuses an app whose default hostname,
// <app>-<tenant>, another app already has: app "x-y" of tenant "z" and app
// "x" of tenant "y-z" would both answer at x-y-z. The answer does not say
// whose app holds it.
func (s *Server) checkDefaultHostname(ctx context.Context, name, tenant string) error {
	var apps platformv1alpha1.AppList
	if err := s.kube.List(ctx, &apps); err != nil {
		return fmt.Errorf("listing apps: %w", err)
	}
	label := name + "-" + tenant
	for _, a := range apps.Items {
		if a.Namespace != tenant && a.Name+"-"+a.Namespace == label {
			return &httpError{status: http.StatusConflict, field: "name",
				message: fmt.Sprintf("app %q would answer at %s.%s, which another app already has: choose another name", name, label, s.appDomain)}
		}
	}
	return nil
}

func (s *Server) deleteApp(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := s.kube.Delete(ctx, app, client.Preconditions{UID: &app.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting app %s: %w", app.Name, err)
	}
	// The Secret is owned by the App, but a cluster without a garbage
	// collector (embedded mode) would keep it: remove it here too.
	if err := s.deleteEnvSecret(ctx, app); err != nil {
		s.log.Error(err, "Deleting env secret failed", "app", client.ObjectKeyFromObject(app))
	}
	// Its Routes would keep holding their hostnames.
	if err := s.deleteAppRoutes(ctx, app); err != nil {
		s.log.Error(err, "Deleting routes failed", "app", client.ObjectKeyFromObject(app))
	}
	s.audit(c, "app.delete", app.Name, nil)
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) deleteEnvSecret(ctx context.Context, app *platformv1alpha1.App) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: envSecretName(app.Name)}}
	if err := s.kube.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
