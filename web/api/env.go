package api

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/web/api/apiclient"
)

const (
	// maxEnvName and maxEnvValue are the CRD's limits.
	maxEnvName  = 256
	maxEnvValue = 32768
	// maxEnvVars is the CRD's limit on spec.env.
	maxEnvVars = 500
)

// envName is the form of a variable's name, as the CRD checks it.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnv are the variables the platform sets itself.
var reservedEnv = []string{"PORT"}

// envSecretName is the Secret that holds an app's secret variables, one key
// per variable name.
func envSecretName(app string) string { return app + "-env" }

// envView shows spec.env without secret values.
func envView(env []platformv1alpha1.EnvVar) []apiclient.EnvVar {
	views := make([]apiclient.EnvVar, 0, len(env))
	for _, e := range env {
		v := apiclient.EnvVar{Name: e.Name}
		if e.SecretKeyRef != nil {
			v.Secret = true
		} else if e.Value != nil {
			val := *e.Value
			v.Value = &val
		}
		views = append(views, v)
	}
	slices.SortFunc(views, func(a, b apiclient.EnvVar) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return views
}

func (s *Server) listEnv(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, envView(app.Spec.Env))
}

// validateEnvPatch says what is wrong with req, or returns nil.
func validateEnvPatch(req apiclient.PatchEnvRequest) error {
	if len(req.Set) == 0 && len(req.Unset) == 0 {
		return invalid("set", "nothing to set or unset")
	}
	for name, value := range req.Set {
		field := "set." + name
		switch {
		case len(name) > maxEnvName || !envName.MatchString(name):
			return invalid(field, "variable name %q: must be letters, digits and '_', not starting with a digit, at most %d characters", name, maxEnvName)
		case slices.Contains(reservedEnv, name):
			return invalid(field, "%s is set by the platform", name)
		case len(value) > maxEnvValue:
			return invalid(field, "the value of %s is longer than %d bytes", name, maxEnvValue)
		case strings.IndexByte(value, 0) >= 0:
			return invalid(field, "the value of %s has a NUL byte at offset %d: a process environment cannot carry one; remove it (or base64 the value)", name, strings.IndexByte(value, 0))
		case !utf8.ValidString(value):
			return invalid(field, "the value of %s is not UTF-8 text", name)
		}
	}
	for i, name := range req.Unset {
		field := fmt.Sprintf("unset[%d]", i)
		if len(name) > maxEnvName || !envName.MatchString(name) {
			return invalid(field, "variable name %q: must be letters, digits and '_', not starting with a digit", name)
		}
		if _, ok := req.Set[name]; ok {
			return invalid(field, "%s is both set and unset", name)
		}
	}
	return nil
}

// patchEnv sets and unsets variables: plain values in the App's spec.env,
// secret ones in the Secret <app>-env that spec.env references. Unless
// the request says noRelease, the Releaser then releases the new
// environment; a release that fails leaves the change stored.
func (s *Server) patchEnv(c echo.Context) error {
	var req apiclient.PatchEnvRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	if err := validateEnvPatch(req); err != nil {
		return err
	}
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	key := client.ObjectKeyFromObject(app)

	// Check the result fits before anything is written.
	if n := len(mergeEnv(app.Name, app.Spec.Env, req)); n > maxEnvVars {
		return invalid("set", "app %q would have %d variables; at most %d are allowed", app.Name, n, maxEnvVars)
	}
	// The Secret first: a variable that references a key must find it.
	if err := s.updateEnvSecret(ctx, app, req); err != nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.kube.Get(ctx, key, app); err != nil {
			return err
		}
		app.Spec.Env = mergeEnv(app.Name, app.Spec.Env, req)
		return s.kube.Update(ctx, app)
	})
	if apierrors.IsNotFound(err) {
		return notFound("app %q not found", key.Name)
	}
	if err != nil {
		return fmt.Errorf("updating the env of app %s: %w", key.Name, err)
	}
	names := make([]string, 0, len(req.Set))
	for name := range req.Set {
		names = append(names, name)
	}
	slices.Sort(names)

	release, releaseErr := 0, error(nil)
	if !req.NoRelease {
		awaitRollout(c)
		p := principalOf(c)
		release, releaseErr = s.deployer.ReleaseConfig(ctx, p.tenant.Name, app.Name, envChange(names, req.Unset), p.actor())
	}
	// The change is stored whatever became of its release: audited either way.
	outcome := map[string]any{}
	switch {
	case req.NoRelease:
		outcome["noRelease"] = true
	case releaseErr != nil:
		outcome["releaseFailed"] = true
	case release > 0:
		outcome["release"] = release
	}
	if len(names) > 0 {
		s.audit(c, "env.set", app.Name, with(outcome, map[string]any{"names": names, "secret": req.Secret}))
	}
	if len(req.Unset) > 0 {
		s.audit(c, "env.unset", app.Name, with(outcome, map[string]any{"names": req.Unset}))
	}
	if releaseErr != nil {
		return fmt.Errorf("the new environment of %s is stored, but %w; it goes out with the next release: fix what failed, then push or set a variable again", app.Name, releaseErr)
	}
	if release > 0 {
		c.Response().Header().Set(apiclient.ReleaseHeader, strconv.Itoa(release))
	}
	return c.JSON(http.StatusOK, envView(app.Spec.Env))
}

// envChange describes a change of the environment in a release list, by
// the names it sets and unsets (never their values): "Set FOO, BAR",
// "Unset FOO", "Set FOO; unset BAR".
func envChange(set, unset []string) string {
	var parts []string
	if len(set) > 0 {
		parts = append(parts, "set "+strings.Join(set, ", "))
	}
	if len(unset) > 0 {
		parts = append(parts, "unset "+strings.Join(unset, ", "))
	}
	d := strings.Join(parts, "; ")
	return strings.ToUpper(d[:1]) + d[1:]
}

// with returns a new map of a's entries and b's.
func with(a, b map[string]any) map[string]any {
	out := maps.Clone(b)
	maps.Copy(out, a)
	return out
}

// mergeEnv returns the env of app with req applied: set variables replace those of the
// same name where they are or are added at the end, unset ones are removed.
func mergeEnv(app string, env []platformv1alpha1.EnvVar, req apiclient.PatchEnvRequest) []platformv1alpha1.EnvVar {
	out := make([]platformv1alpha1.EnvVar, 0, len(env)+len(req.Set))
	entry := func(name string) platformv1alpha1.EnvVar {
		if req.Secret {
			return platformv1alpha1.EnvVar{Name: name, SecretKeyRef: &platformv1alpha1.SecretKeySelector{Name: envSecretName(app), Key: name}}
		}
		v := req.Set[name]
		return platformv1alpha1.EnvVar{Name: name, Value: &v}
	}
	done := map[string]bool{}
	for _, e := range env {
		switch _, set := req.Set[e.Name]; {
		case slices.Contains(req.Unset, e.Name):
		case set:
			out = append(out, entry(e.Name))
			done[e.Name] = true
		default:
			out = append(out, e)
		}
	}
	var added []string
	for name := range req.Set {
		if !done[name] {
			added = append(added, name)
		}
	}
	slices.Sort(added)
	for _, name := range added {
		out = append(out, entry(name))
	}
	return out
}

// updateEnvSecret writes the secret values of req into the app's Secret
// and removes the keys of variables that are unset or become plain. It
// deletes the Secret when no key is left.
func (s *Server) updateEnvSecret(ctx context.Context, app *platformv1alpha1.App, req apiclient.PatchEnvRequest) error {
	var drop []string
	drop = append(drop, req.Unset...)
	if !req.Secret {
		for name := range req.Set {
			drop = append(drop, name)
		}
	}
	name := envSecretName(app.Name)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sec := &corev1.Secret{}
		err := s.kube.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: name}, sec)
		exists := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading secret %s: %w", name, err)
		}
		if !exists {
			if !req.Secret {
				return nil // nothing kept, nothing to drop
			}
			sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
				Namespace: app.Namespace,
				Name:      name,
				Labels:    map[string]string{TenantLabel: app.Namespace, AppLabel: app.Name},
			}, Type: corev1.SecretTypeOpaque}
			if err := controllerutil.SetOwnerReference(app, sec, s.kube.Scheme()); err != nil {
				return fmt.Errorf("owning secret %s: %w", name, err)
			}
		}
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		changed := false
		for _, k := range drop {
			if _, ok := sec.Data[k]; ok {
				delete(sec.Data, k)
				changed = true
			}
		}
		if req.Secret {
			for k, v := range req.Set {
				sec.Data[k] = []byte(v)
				changed = true
			}
		}
		switch {
		case !exists:
			return s.kube.Create(ctx, sec)
		case len(sec.Data) == 0:
			return client.IgnoreNotFound(s.kube.Delete(ctx, sec, client.Preconditions{ResourceVersion: &sec.ResourceVersion}))
		case changed:
			return s.kube.Update(ctx, sec)
		}
		return nil
	})
}
