package crds_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "bex.co/bex/apis/fleet/v1alpha1"
	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
)

const tenant = "tenant-a"

// TestValidation creates good and bad objects of every kind on one real
// kube-apiserver with the CRDs of deploy/crds installed. Good specs must be
// accepted (and defaulted); bad specs must be refused with an Invalid error
// that names the field at fault.
func TestValidation(t *testing.T) {
	cp := cptest.Start(t)
	c := newClient(t, cp.RESTConfig())
	ctx := testContext(t)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}

	t.Run("App", func(t *testing.T) { testAppCreate(t, c) })
	t.Run("AppDefaults", func(t *testing.T) { testAppDefaults(t, c) })
	t.Run("AppIntegerQuantities", func(t *testing.T) { testAppIntegerQuantities(t, c) })
	t.Run("AppNoRepositoryField", func(t *testing.T) { testAppNoRepositoryField(t, c) })
	t.Run("Route", func(t *testing.T) { testRouteCreate(t, c) })
	t.Run("FleetUpgrade", func(t *testing.T) { testFleetUpgradeCreate(t, c) })
	t.Run("Updates", func(t *testing.T) { testUpdates(t, c) })
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		platformv1alpha1.AddToScheme,
		fleetv1alpha1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			t.Fatalf("building scheme: %v", err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("creating client: %v", err)
	}
	return c
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// createCase is one object to create: accepted when wantField is empty, else
// refused with a cause on wantField whose message contains wantMsg.
type createCase[T client.Object] struct {
	name      string
	mutate    func(T)
	wantField string
	wantMsg   string
}

func runCreateCases[T client.Object](t *testing.T, c client.Client, base func(name string) T, cases []createCase[T]) {
	t.Helper()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := base(fmt.Sprintf("case-%d", i))
			if tc.mutate != nil {
				tc.mutate(obj)
			}
			assertOutcome(t, c.Create(testContext(t), obj), tc.wantField, tc.wantMsg)
		})
	}
}

// assertOutcome checks that the apiserver accepted the request when
// wantField is empty, and otherwise refused it as assertInvalid describes.
func assertOutcome(t *testing.T, err error, wantField, wantMsg string) {
	t.Helper()
	if wantField == "" {
		if err != nil {
			t.Fatalf("want the request accepted, got: %v", err)
		}
		return
	}
	assertInvalid(t, err, wantField, wantMsg)
}

// fieldCheck is one field of an object read back from the apiserver.
type fieldCheck struct {
	field     string
	got, want any
}

func checkFields(t *testing.T, checks []fieldCheck) {
	t.Helper()
	for _, check := range checks {
		if check.got != check.want {
			t.Errorf("%s = %v, want %v", check.field, check.got, check.want)
		}
	}
}

// assertInvalid checks that err is the apiserver's Invalid error with a cause
// on field whose message contains msg. A CEL rule on the object's root (the
// App's metadata.name rule) is reported without a field path, so for those
// the cause's message must name the field instead.
func assertInvalid(t *testing.T, err error, field, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want the object refused naming %s, but it was accepted", field)
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("want an Invalid error naming %s, got: %v", field, err)
	}
	for _, cause := range status.Status().Details.Causes {
		onField := cause.Field == field
		onRoot := (cause.Field == "" || cause.Field == "<nil>") && strings.Contains(cause.Message, field+" ")
		if (onField || onRoot) && strings.Contains(cause.Message, msg) {
			t.Logf("refused: %v", err)
			return
		}
	}
	t.Fatalf("want a cause on %s containing %q, got: %v", field, msg, err)
}

func baseApp(name string) *platformv1alpha1.App {
	return &platformv1alpha1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant},
		Spec: platformv1alpha1.AppSpec{
			Source: platformv1alpha1.AppSource{Branch: "release/v2"},
			Build:  platformv1alpha1.AppBuild{Stack: platformv1alpha1.StackNode, Command: "npm run build"},
			Processes: []platformv1alpha1.Process{
				{Name: "web", Command: "node server.js", Replicas: ptr.To[int32](2)},
				{Name: "worker", Command: "node worker.js", Replicas: ptr.To[int32](0)},
			},
			Env: []platformv1alpha1.EnvVar{
				{Name: "NODE_ENV", Value: ptr.To("production")},
				{Name: "EMPTY", Value: ptr.To("")},
				{Name: "DATABASE_URL", SecretKeyRef: &platformv1alpha1.SecretKeySelector{Name: "db", Key: "url"}},
			},
			HealthCheck: &platformv1alpha1.HealthCheck{Path: "/healthz", Port: ptr.To[int32](8080)},
			Plan:        platformv1alpha1.PlanStandard,
			Resources: &platformv1alpha1.Resources{
				CPU:    ptr.To(resource.MustParse("500m")),
				Memory: ptr.To(resource.MustParse("512Mi")),
			},
		},
	}
}

func testAppCreate(t *testing.T, c client.Client) {
	type app = *platformv1alpha1.App
	runCreateCases(t, c, baseApp, []createCase[app]{
		{name: "full spec"},
		{name: "name of 40 characters", mutate: func(a app) { a.Name = strings.Repeat("a", 40) }},
		{name: "empty spec", mutate: func(a app) { a.Spec = platformv1alpha1.AppSpec{} }},
		{name: "dockerfile with dockerfile stack", mutate: func(a app) {
			a.Spec.Build = platformv1alpha1.AppBuild{Stack: platformv1alpha1.StackDockerfile, Dockerfile: "docker/Dockerfile.prod"}
		}},
		{name: "dockerfile without stack", mutate: func(a app) {
			a.Spec.Build = platformv1alpha1.AppBuild{Dockerfile: "Dockerfile"}
		}},
		{name: "replicas 20", mutate: func(a app) { a.Spec.Processes[0].Replicas = ptr.To[int32](20) }},

		{name: "name of 41 characters", mutate: func(a app) { a.Name = strings.Repeat("a", 41) },
			wantField: "metadata.name", wantMsg: "at most 40 characters"},
		{name: "name with a dot", mutate: func(a app) { a.Name = "my.app" },
			wantField: "metadata.name", wantMsg: "DNS label"},
		{name: "uppercase name", mutate: func(a app) { a.Name = "Shop" },
			wantField: "metadata.name", wantMsg: "lowercase"},
		{name: "replicas 21", mutate: func(a app) { a.Spec.Processes[0].Replicas = ptr.To[int32](21) },
			wantField: "spec.processes[0].replicas", wantMsg: "less than or equal to 20"},
		{name: "replicas -1", mutate: func(a app) { a.Spec.Processes[1].Replicas = ptr.To[int32](-1) },
			wantField: "spec.processes[1].replicas", wantMsg: "greater than or equal to 0"},
		{name: "two web processes", mutate: func(a app) { a.Spec.Processes[1].Name = "web" },
			wantField: "spec.processes[1]", wantMsg: "Duplicate value"},
		{name: "eleven processes", mutate: func(a app) {
			a.Spec.Processes = nil
			for i := range 11 {
				a.Spec.Processes = append(a.Spec.Processes, platformv1alpha1.Process{Name: fmt.Sprintf("p%d", i)})
			}
		}, wantField: "spec.processes", wantMsg: "must have at most 10 items"},
		{name: "process name not a DNS label", mutate: func(a app) { a.Spec.Processes[1].Name = "Worker_1" },
			wantField: "spec.processes[1].name", wantMsg: "should match"},
		{name: "health path without slash", mutate: func(a app) { a.Spec.HealthCheck.Path = "healthz" },
			wantField: "spec.healthCheck.path", wantMsg: "must start with '/'"},
		{name: "health timeout 61", mutate: func(a app) { a.Spec.HealthCheck.TimeoutSeconds = 61 },
			wantField: "spec.healthCheck.timeoutSeconds", wantMsg: "less than or equal to 60"},
		{name: "health port 70000", mutate: func(a app) { a.Spec.HealthCheck.Port = ptr.To[int32](70000) },
			wantField: "spec.healthCheck.port", wantMsg: "less than or equal to 65535"},
		{name: "env with value and secretKeyRef", mutate: func(a app) {
			a.Spec.Env[0].SecretKeyRef = &platformv1alpha1.SecretKeySelector{Name: "s", Key: "k"}
		}, wantField: "spec.env[0]", wantMsg: "exactly one of value or secretKeyRef"},
		{name: "env with neither value nor secretKeyRef", mutate: func(a app) { a.Spec.Env[1].Value = nil },
			wantField: "spec.env[1]", wantMsg: "exactly one of value or secretKeyRef"},
		{name: "bad env name", mutate: func(a app) { a.Spec.Env[0].Name = "1NODE-ENV" },
			wantField: "spec.env[0].name", wantMsg: "should match"},
		{name: "dockerfile with go stack", mutate: func(a app) {
			a.Spec.Build = platformv1alpha1.AppBuild{Stack: platformv1alpha1.StackGo, Dockerfile: "Dockerfile"}
		}, wantField: "spec.build.dockerfile", wantMsg: "stack is dockerfile or unset"},
		{name: "dockerfile outside the repository", mutate: func(a app) {
			a.Spec.Build = platformv1alpha1.AppBuild{Dockerfile: "../Dockerfile"}
		}, wantField: "spec.build.dockerfile", wantMsg: "relative to the repository root"},
		{name: "unknown stack", mutate: func(a app) { a.Spec.Build.Stack = "rust" },
			wantField: "spec.build.stack", wantMsg: "Unsupported value"},
		{name: "unknown plan", mutate: func(a app) { a.Spec.Plan = "enterprise" },
			wantField: "spec.plan", wantMsg: "Unsupported value"},
		{name: "zero cpu", mutate: func(a app) { a.Spec.Resources.CPU = ptr.To(resource.MustParse("0")) },
			wantField: "spec.resources.cpu", wantMsg: "greater than zero"},
		{name: "negative memory", mutate: func(a app) { a.Spec.Resources.Memory = ptr.To(resource.MustParse("-1Gi")) },
			wantField: "spec.resources.memory", wantMsg: "greater than zero"},
	})
}

// testAppDefaults creates an App with an empty spec and checks what the
// apiserver filled in.
func testAppDefaults(t *testing.T, c client.Client) {
	ctx := testContext(t)
	app := &platformv1alpha1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: tenant},
		Spec: platformv1alpha1.AppSpec{
			Processes:   []platformv1alpha1.Process{{Name: "web"}},
			HealthCheck: &platformv1alpha1.HealthCheck{Path: "/"},
		},
	}
	if err := c.Create(ctx, app); err != nil {
		t.Fatalf("creating App: %v", err)
	}
	got := app.Spec
	checkFields(t, []fieldCheck{
		{"spec.source.branch", got.Source.Branch, "main"},
		{"spec.plan", got.Plan, platformv1alpha1.PlanStarter},
		{"spec.processes[0].replicas", ptr.Deref(got.Processes[0].Replicas, -1), int32(1)},
		{"spec.healthCheck.timeoutSeconds", got.HealthCheck.TimeoutSeconds, int32(5)},
		{"spec.healthCheck.intervalSeconds", got.HealthCheck.IntervalSeconds, int32(10)},
		{"spec.healthCheck.successThreshold", got.HealthCheck.SuccessThreshold, int32(1)},
		{"spec.healthCheck.failureThreshold", got.HealthCheck.FailureThreshold, int32(3)},
	})
}

// testAppIntegerQuantities sends resources as JSON integers, as kubectl does
// for "cpu: 2", which the CEL rules see as int rather than string.
func testAppIntegerQuantities(t *testing.T, c client.Client) {
	for _, tc := range []struct {
		name      string
		cpu       int64
		wantField string
	}{
		{name: "two cpus", cpu: 2},
		{name: "zero cpus", cpu: 0, wantField: "spec.resources.cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": platformv1alpha1.GroupVersion.String(),
				"kind":       "App",
				"metadata":   map[string]any{"name": fmt.Sprintf("int-cpu-%d", tc.cpu), "namespace": tenant},
				"spec":       map[string]any{"resources": map[string]any{"cpu": tc.cpu}},
			}}
			assertOutcome(t, c.Create(testContext(t), u), tc.wantField, "greater than zero")
		})
	}
}

// testAppNoRepositoryField: an App's repository is its name, so the
// schema has no spec.source.repository (it had one that nothing read); a
// manifest that still sets it is told, under kubectl's strict field
// validation, rather than left to think it chose a repository.
func testAppNoRepositoryField(t *testing.T, c client.Client) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": platformv1alpha1.GroupVersion.String(),
		"kind":       "App",
		"metadata":   map[string]any{"name": "with-repository", "namespace": tenant},
		"spec":       map[string]any{"source": map[string]any{"repository": "shop", "branch": "main"}},
	}}
	err := c.Create(testContext(t), u, client.FieldValidation(metav1.FieldValidationStrict))
	if err == nil || !strings.Contains(err.Error(), `unknown field "spec.source.repository"`) {
		t.Fatalf("creating an App with spec.source.repository under strict validation: got %v, want an unknown field error", err)
	}
}

func baseRoute(name string) *platformv1alpha1.Route {
	return &platformv1alpha1.Route{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant},
		Spec: platformv1alpha1.RouteSpec{
			Hostname:   name + ".example.com",
			AppRef:     platformv1alpha1.AppReference{Name: "shop"},
			Process:    "web",
			Port:       ptr.To[int32](8080),
			PathPrefix: "/api",
			TLS:        platformv1alpha1.RouteTLS{Mode: platformv1alpha1.TLSModeAuto},
		},
	}
}

func testRouteCreate(t *testing.T, c client.Client) {
	type route = *platformv1alpha1.Route
	label63 := strings.Repeat("a", 63)
	runCreateCases(t, c, baseRoute, []createCase[route]{
		{name: "full spec"},
		{name: "minimal spec", mutate: func(r route) {
			r.Spec = platformv1alpha1.RouteSpec{Hostname: r.Name + ".shop.example", AppRef: r.Spec.AppRef}
		}},
		{name: "wildcard", mutate: func(r route) { r.Spec.Hostname = "*.apps.example.com" }},
		{name: "label of 63 characters", mutate: func(r route) { r.Spec.Hostname = label63 + ".example.com" }},
		{name: "tls from a secret", mutate: func(r route) {
			r.Spec.TLS = platformv1alpha1.RouteTLS{Mode: platformv1alpha1.TLSModeSecret, SecretName: "shop-tls"}
		}},
		{name: "plain http", mutate: func(r route) { r.Spec.TLS = platformv1alpha1.RouteTLS{Mode: platformv1alpha1.TLSModeNone} }},

		{name: "uppercase and empty label", mutate: func(r route) { r.Spec.Hostname = "Foo..bar" },
			wantField: "spec.hostname", wantMsg: "must be a lowercase DNS name"},
		{name: "leading hyphen", mutate: func(r route) { r.Spec.Hostname = "-a.com" },
			wantField: "spec.hostname", wantMsg: "must be a lowercase DNS name"},
		{name: "label of 64 characters", mutate: func(r route) { r.Spec.Hostname = label63 + "a.example.com" },
			wantField: "spec.hostname", wantMsg: "each label must be at most 63 characters"},
		{name: "wildcard not leading", mutate: func(r route) { r.Spec.Hostname = "www.*.example.com" },
			wantField: "spec.hostname", wantMsg: "wildcard is allowed only as a leading '*.'"},
		{name: "single label", mutate: func(r route) { r.Spec.Hostname = "localhost" },
			wantField: "spec.hostname", wantMsg: "at least two labels"},
		{name: "hostname longer than 253", mutate: func(r route) {
			r.Spec.Hostname = strings.Repeat(label63+".", 4) + "com"
		}, wantField: "spec.hostname", wantMsg: "Too long"},
		{name: "missing appRef name", mutate: func(r route) { r.Spec.AppRef.Name = "" },
			wantField: "spec.appRef.name", wantMsg: ""},
		{name: "path prefix without slash", mutate: func(r route) { r.Spec.PathPrefix = "api" },
			wantField: "spec.pathPrefix", wantMsg: "must start with '/'"},
		{name: "tls secret without secretName", mutate: func(r route) {
			r.Spec.TLS = platformv1alpha1.RouteTLS{Mode: platformv1alpha1.TLSModeSecret}
		}, wantField: "spec.tls.secretName", wantMsg: "required when spec.tls.mode is Secret"},
		{name: "secretName with auto tls", mutate: func(r route) { r.Spec.TLS.SecretName = "shop-tls" },
			wantField: "spec.tls.secretName", wantMsg: "not allowed otherwise"},
		{name: "unknown tls mode", mutate: func(r route) { r.Spec.TLS.Mode = "Manual" },
			wantField: "spec.tls.mode", wantMsg: "Unsupported value"},
	})
}

func baseFleetUpgrade(name string) *fleetv1alpha1.FleetUpgrade {
	return &fleetv1alpha1.FleetUpgrade{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: fleetv1alpha1.FleetUpgradeSpec{
			TargetVersion: "v1.37.2",
			FromVersion:   "v1.36.3",
			ClusterSelector: metav1.LabelSelector{
				MatchLabels: map[string]string{"bex.co/pool": "eu"},
			},
			CanaryCluster: &fleetv1alpha1.ClusterReference{Namespace: "fleet", Name: "eu-canary"},
			Waves: []fleetv1alpha1.Wave{
				{Name: "first", MaxParallel: 1, ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"wave": "1"}}},
				{Name: "rest", MaxParallel: 3},
			},
			MaxParallelClusters: 3,
			SoakTime:            &metav1.Duration{Duration: 30 * time.Minute},
			Gates:               fleetv1alpha1.UpgradeGates{MVPVerified: ptr.To(true), MaxSpurious404: 0, RequireWireMVP: true},
			WireMVP:             true,
		},
	}
}

func testFleetUpgradeCreate(t *testing.T, c client.Client) {
	type fu = *fleetv1alpha1.FleetUpgrade
	runCreateCases(t, c, baseFleetUpgrade, []createCase[fu]{
		{name: "full spec"},
		{name: "without fromVersion", mutate: func(f fu) { f.Spec.FromVersion = "" }},
		{name: "versions without v", mutate: func(f fu) { f.Spec.FromVersion, f.Spec.TargetVersion = "1.35.4", "1.36.3" }},
		{name: "minimal spec", mutate: func(f fu) { f.Spec = fleetv1alpha1.FleetUpgradeSpec{TargetVersion: "v1.37.2"} }},

		{name: "skips a minor version", mutate: func(f fu) { f.Spec.FromVersion, f.Spec.TargetVersion = "1.36.3", "1.38.0" },
			wantField: "spec.targetVersion", wantMsg: "skips a minor version"},
		{name: "same minor version", mutate: func(f fu) { f.Spec.FromVersion, f.Spec.TargetVersion = "v1.37.1", "v1.37.2" },
			wantField: "spec.targetVersion", wantMsg: "exactly one minor version above spec.fromVersion"},
		{name: "downgrade", mutate: func(f fu) { f.Spec.FromVersion, f.Spec.TargetVersion = "v1.37.2", "v1.36.3" },
			wantField: "spec.targetVersion", wantMsg: "exactly one minor version above spec.fromVersion"},
		{name: "target without patch", mutate: func(f fu) { f.Spec.TargetVersion = "v1.37" },
			wantField: "spec.targetVersion", wantMsg: "should match"},
		{name: "major version 2", mutate: func(f fu) { f.Spec.FromVersion, f.Spec.TargetVersion = "", "v2.0.0" },
			wantField: "spec.targetVersion", wantMsg: "should match"},
		{name: "bad fromVersion", mutate: func(f fu) { f.Spec.FromVersion = "latest" },
			wantField: "spec.fromVersion", wantMsg: "should match"},
		{name: "51 parallel clusters", mutate: func(f fu) { f.Spec.MaxParallelClusters = 51 },
			wantField: "spec.maxParallelClusters", wantMsg: "less than or equal to 50"},
		{name: "negative soak", mutate: func(f fu) { f.Spec.SoakTime = &metav1.Duration{Duration: -time.Minute} },
			wantField: "spec.soakTime", wantMsg: "must not be negative"},
		{name: "negative spurious 404s", mutate: func(f fu) { f.Spec.Gates.MaxSpurious404 = -1 },
			wantField: "spec.gates.maxSpurious404", wantMsg: "greater than or equal to 0"},
		{name: "duplicate wave", mutate: func(f fu) { f.Spec.Waves[1].Name = "first" },
			wantField: "spec.waves[1]", wantMsg: "Duplicate value"},
	})

	t.Run("defaults", func(t *testing.T) {
		f := &fleetv1alpha1.FleetUpgrade{
			ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
			Spec: fleetv1alpha1.FleetUpgradeSpec{
				TargetVersion: "v1.37.2",
				Waves:         []fleetv1alpha1.Wave{{Name: "all"}},
			},
		}
		if err := c.Create(testContext(t), f); err != nil {
			t.Fatalf("creating FleetUpgrade: %v", err)
		}
		checkFields(t, []fieldCheck{
			{"spec.maxParallelClusters", f.Spec.MaxParallelClusters, int32(1)},
			{"spec.soakTime", ptr.Deref(f.Spec.SoakTime, metav1.Duration{}).Duration, 10 * time.Minute},
			{"spec.gates.mvpVerified", ptr.Deref(f.Spec.Gates.MVPVerified, false), true},
			{"spec.gates.maxSpurious404", f.Spec.Gates.MaxSpurious404, int32(0)},
			{"spec.waves[0].maxParallel", f.Spec.Waves[0].MaxParallel, int32(1)},
		})
	})
}

// testUpdates changes objects after creation: allowed changes go through,
// changes to immutable fields are refused naming the field.
func testUpdates(t *testing.T, c client.Client) {
	newApp := func(t *testing.T, name string) client.Object { return baseApp(name) }
	newRoute := func(t *testing.T, name string) client.Object { return baseRoute(name) }
	newFU := func(t *testing.T, name string) client.Object { return baseFleetUpgrade(name) }
	newAbortedFU := func(t *testing.T, name string) client.Object {
		f := baseFleetUpgrade(name)
		f.Spec.Abort = true
		return f
	}
	app := func(f func(*platformv1alpha1.App)) func(client.Object) {
		return func(o client.Object) { f(o.(*platformv1alpha1.App)) }
	}
	route := func(f func(*platformv1alpha1.Route)) func(client.Object) {
		return func(o client.Object) { f(o.(*platformv1alpha1.Route)) }
	}
	fu := func(f func(*fleetv1alpha1.FleetUpgrade)) func(client.Object) {
		return func(o client.Object) { f(o.(*fleetv1alpha1.FleetUpgrade)) }
	}

	for i, tc := range []struct {
		name      string
		create    func(t *testing.T, name string) client.Object
		update    func(client.Object)
		wantField string
		wantMsg   string
	}{
		{name: "app branch and scale", create: newApp, update: app(func(a *platformv1alpha1.App) {
			a.Spec.Source.Branch = "main"
			a.Spec.Processes[0].Replicas = ptr.To[int32](5)
			a.Spec.Suspended = true
		})},
		{name: "route app and tls", create: newRoute, update: route(func(r *platformv1alpha1.Route) {
			r.Spec.AppRef.Name = "shop-v2"
			r.Spec.TLS = platformv1alpha1.RouteTLS{Mode: platformv1alpha1.TLSModeSecret, SecretName: "tls"}
		})},
		{name: "route hostname changed", create: newRoute, update: route(func(r *platformv1alpha1.Route) {
			r.Spec.Hostname = "other.example.com"
		}), wantField: "spec.hostname", wantMsg: "cannot change"},
		{name: "upgrade paused and aborted", create: newFU, update: fu(func(f *fleetv1alpha1.FleetUpgrade) {
			f.Spec.Paused = true
			f.Spec.Abort = true
		})},
		{name: "upgrade target changed", create: newFU, update: fu(func(f *fleetv1alpha1.FleetUpgrade) {
			f.Spec.TargetVersion = "v1.37.3"
		}), wantField: "spec.targetVersion", wantMsg: "cannot change"},
		{name: "upgrade abort taken back", create: newAbortedFU, update: fu(func(f *fleetv1alpha1.FleetUpgrade) {
			f.Spec.Abort = false
		}), wantField: "spec.abort", wantMsg: "cannot go back to false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			obj := tc.create(t, fmt.Sprintf("update-%d", i))
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("creating: %v", err)
			}
			tc.update(obj)
			assertOutcome(t, c.Update(ctx, obj), tc.wantField, tc.wantMsg)
		})
	}
}
