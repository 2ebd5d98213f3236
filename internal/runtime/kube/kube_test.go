package kube_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/internal/steptime"
	"bex.co/bex/node"
	"bex.co/bex/node/nodetest"
	"bex.co/bex/test/platformtest"
)

func TestKubeDriver(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	// One cluster for every subtest: a real apiserver, controller manager
	// and scheduler, and bex-node running the Pods as runc containers.
	f := nodetest.Start(t, func(f *nodetest.Fixture, o *node.Options) {
		// The driver's Pods name no pull secret: the node pulls with its
		// own credentials, as a worker machine's bex-node does.
		o.Keychain = f.Keychain()
		// More than this machine has, so that the Pods of every subtest
		// fit at once; each container is still held to its limits.
		o.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("32Gi")}
	})
	cfg := f.CP.RESTConfig()
	k := &cluster{Fixture: f, c: newClient(t, cfg),
		image1: f.PushAppImage(t, "acme/shop:1"), image2: f.PushAppImage(t, "acme/shop:2")}
	c := k.c
	newDriverWith := func(t *testing.T, opts kube.Options) *kube.Driver {
		opts.PollInterval, opts.ProgressDeadline = 50*time.Millisecond, 20*time.Second
		d, err := kube.New(cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	newDriver := func(t *testing.T) *kube.Driver { return newDriverWith(t, kube.Options{}) }

	// The drivers' suite (runtimetest.RunDriverSuite) runs on a cluster
	// like this one in node's TestKubeDriverSuiteOnTheNode, with every
	// case: not again here.
	//
	// First, one at a time, the subtests that see beyond their own app:
	// the tenant namespace's labels and policies, which the others' Pods
	// run under; then the metrics, which count every app's Pod of the
	// cluster, beside the sweep, which deletes ended run Pods in every
	// namespace (run Pods are no app's instances). Then the others side
	// by side, each with its own app: they mostly wait for the node (a
	// minute of CPU in four of waiting, one after another).
	parallel := func(t *testing.T, name string, test func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t)
		})
	}
	t.Run("TenantNamespace", func(t *testing.T) { testTenantNamespace(t, k, newDriverWith) })
	t.Run("PreparedNamespaces", func(t *testing.T) { testPreparedNamespaces(t, k, newDriverWith) })
	t.Run("BuildPods", func(t *testing.T) { testBuildPods(t, k, newDriverWith) })
	t.Run("ClusterWide", func(t *testing.T) {
		parallel(t, "Metrics", func(t *testing.T) { testMetrics(t, k, newDriver(t)) })
		parallel(t, "RunSweep", func(t *testing.T) {
			const retention = 30 * time.Second
			testRunSweep(t, k, newDriverWith(t, kube.Options{RunLogRetention: retention}), retention)
		})
	})
	parallel(t, "Objects", func(t *testing.T) { testObjects(t, k, newDriver(t)) })
	parallel(t, "Timings", func(t *testing.T) { testTimings(t, k, newDriver(t)) })
	parallel(t, "RolloutSeenByWatch", func(t *testing.T) {
		d, err := kube.New(cfg, kube.Options{PollInterval: time.Hour, ProgressDeadline: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		testRolloutSeenByWatch(t, k, d)
	})
	parallel(t, "FailedRolloutRestoresPrevious", func(t *testing.T) { testFailedRollout(t, k, newDriver(t)) })
	// A client that may ask once a second: near a deadline its rate
	// limiter refuses the next read before the deadline passes.
	throttled := func(t *testing.T, opts kube.Options) *kube.Driver {
		slow := rest.CopyConfig(cfg)
		slow.QPS, slow.Burst = 1, 1
		opts.PollInterval = 50 * time.Millisecond
		d, err := kube.New(slow, opts)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	parallel(t, "RolloutDeadlineWhileThrottled", func(t *testing.T) {
		testRolloutDeadlineWhileThrottled(t, k, throttled(t, kube.Options{RolloutTimeout: 3 * time.Second}))
	})
	parallel(t, "RunStartDeadlineWhileThrottled", func(t *testing.T) {
		testRunStartDeadlineWhileThrottled(t, k, throttled(t, kube.Options{RunStartTimeout: 3 * time.Second}))
	})
	parallel(t, "Logs", func(t *testing.T) { testLogs(t, k, newDriver(t)) })
	parallel(t, "EnvSecrets", func(t *testing.T) { testEnvSecrets(t, k, newDriver(t)) })
	parallel(t, "Watch", func(t *testing.T) { testWatch(t, k, newDriver(t)) })
	parallel(t, "EndRun", func(t *testing.T) { testEndRun(t, k, newDriver(t)) })
	parallel(t, "InvalidResources", func(t *testing.T) {
		d := newDriver(t)
		rel := shopRelease(1, k.image1)
		rel.App = "badres"
		rel.Resources.CPU = "lots"
		err := d.Deploy(context.Background(), rel, nil)
		if err == nil || !strings.Contains(err.Error(), `invalid cpu "lots"`) {
			t.Fatalf("Deploy: %v, want an invalid cpu error", err)
		}
		var deps appsv1.DeploymentList
		if err := c.List(context.Background(), &deps, client.InNamespace("acme"), client.MatchingLabels{kube.LabelApp: "badres"}); err != nil || len(deps.Items) != 0 {
			t.Errorf("objects written for a refused release: %v %v", deps.Items, err)
		}
	})
}

// cluster is what TestKubeDriver's subtests share: the node's cluster, a
// client of its admin, and two images of the test app, as a Go stack's
// (run on the run base, which has the shell the driver's commands need).
type cluster struct {
	*nodetest.Fixture
	c              client.Client
	image1, image2 string
}

func newClient(t testing.TB, cfg *rest.Config) client.Client {
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// shopRelease is release number of the test app as image runs it: a web
// process of two instances and a worker, with its health check, its
// environment and its resources.
func shopRelease(number int, image string) runtime.Release {
	return runtime.Release{
		Tenant: "acme", App: "shop", Number: number, Image: image,
		Env: map[string]string{"B_VAR": "b", "A_VAR": "a", "PORT": "9999"},
		// The image's environment as an unpacked copy on the platform's
		// machine sees it: host paths, which a container must not get.
		ImageEnv: map[string]string{"PATH": "/var/lib/bex/releases/acme/shop/v1/bin:/usr/bin", "VIRTUAL_ENV": "/var/lib/bex/releases/acme/shop/v1/.venv"},
		Processes: map[string]runtime.Process{
			runtime.WebProcess: {Command: "./testapp", Replicas: 2},
			"worker":           {Command: "./testapp worker", Replicas: 1},
		},
		HealthCheck: runtime.HealthCheck{Path: "/healthz", Timeout: 2 * time.Second, Interval: 1500 * time.Millisecond, FailureThreshold: 4},
		Resources:   runtime.Resources{CPU: "250m", Memory: "256Mi"},
	}
}

// deploy runs Deploy in the background; the returned channel gets its error.
func deploy(d *kube.Driver, rel runtime.Release, log *platformtest.SyncBuffer) <-chan error {
	done := make(chan error, 1)
	go func() { done <- d.Deploy(context.Background(), rel, log) }()
	return done
}

func replicas(dep *appsv1.Deployment) int32 {
	if dep.Spec.Replicas == nil {
		return 1
	}
	return *dep.Spec.Replicas
}

// remove removes an app at the end of a subtest, so that its Pods leave
// the node to the next.
func remove(t *testing.T, d *kube.Driver, tenant, app string) {
	t.Cleanup(func() {
		if err := d.Remove(context.Background(), tenant, app); err != nil {
			t.Errorf("removing %s/%s: %v", tenant, app, err)
		}
	})
}

// podIP returns the address of a running Pod.
func podIP(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	var pod corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Status.PodIP == "" {
		t.Fatalf("pod %s/%s has no address: %+v", ns, name, pod.Status)
	}
	return pod.Status.PodIP
}

// crash asks the test app of a web Pod for /exit, as an app that crashes,
// and waits until the node restarted its container in place and the Pod
// is ready again.
func crash(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	var pod corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		t.Fatal(err)
	}
	before := restarts(&pod)
	// The app exits before it answers.
	_, _, _ = nodetest.Get(context.Background(), "http://"+net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(kube.WebPort))+"/exit")
	platformtest.Eventually(t, time.Minute, "pod "+name+" restarted and ready", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
			return err
		}
		if n := restarts(&pod); n != before+1 || !ready(&pod) {
			return fmt.Errorf("%d restarts (%d before), ready %v: %+v", n, before, ready(&pod), pod.Status.ContainerStatuses)
		}
		return nil
	})
}

func restarts(pod *corev1.Pod) int32 {
	var n int32
	for _, cs := range pod.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

func ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// testTimings checks that a deploy times its steps in the push's
// timeline, the rollout from the Deployment's write to its rolled-out
// status.
func testTimings(t *testing.T, k *cluster, d *kube.Driver) {
	// The app listens, and so is ready, held seconds after it starts: the
	// rollout lasts at least that.
	const held = 2 * time.Second
	rel := shopRelease(1, k.image1)
	rel.App = "clock"
	rel.Env["LISTEN_DELAY"] = held.String()
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Command: "./testapp", Replicas: 1}}
	remove(t, d, rel.Tenant, rel.App)
	ctx, tl := steptime.New(context.Background())
	if err := d.Deploy(ctx, rel, io.Discard); err != nil {
		t.Fatal(err)
	}
	steps := tl.Steps()
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	if got, want := strings.Join(names, ","), "namespace,apply,rollout,prune"; got != want {
		t.Fatalf("steps %s (%s), want %s", got, steptime.Format(steps), want)
	}
	if rollout := steps[2].Seconds; rollout < held.Seconds() {
		t.Errorf("rollout step %s, want at least the %s its app took to listen", steptime.Seconds(rollout), held)
	}
}

// testRolloutSeenByWatch checks that a deploy ends as soon as its
// Deployment reports the rollout done, however far its next poll is (d
// polls once an hour).
func testRolloutSeenByWatch(t *testing.T, k *cluster, d *kube.Driver) {
	rel := shopRelease(1, k.image1)
	rel.App = "watched"
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Command: "./testapp", Replicas: 1}}
	remove(t, d, rel.Tenant, rel.App)
	var log platformtest.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- d.Deploy(context.Background(), rel, &log) }()
	platformtest.Eventually(t, 30*time.Second, "the deploy waiting for its rollout", func(context.Context) error {
		if !strings.Contains(log.String(), "Waiting for web") {
			return fmt.Errorf("log %q", log.String())
		}
		return nil
	})
	// The deployment controller says the rollout is done once the node
	// has the Pod ready.
	platformtest.Eventually(t, time.Minute, "the Deployment rolled out", func(ctx context.Context) error {
		var dep appsv1.Deployment
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "watched-web"}, &dep); err != nil {
			return err
		}
		if st := dep.Status; st.ObservedGeneration < dep.Generation || st.UpdatedReplicas != 1 || st.AvailableReplicas != 1 || st.Replicas != 1 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the deploy did not end within 30 s of its Deployment's rolled-out status: it waits for its next poll, an hour away")
	}
}

func getDeployment(t *testing.T, c client.Client, name string, match func(*appsv1.Deployment) error) *appsv1.Deployment {
	t.Helper()
	var dep appsv1.Deployment
	platformtest.Eventually(t, 30*time.Second, "deployment "+name, func(context.Context) error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "acme", Name: name}, &dep); err != nil {
			return err
		}
		return match(&dep)
	})
	return &dep
}

func release(n string) func(*appsv1.Deployment) error {
	return func(d *appsv1.Deployment) error {
		if got := d.Spec.Template.Labels[kube.LabelRelease]; got != n {
			return fmt.Errorf("template release %q", got)
		}
		return nil
	}
}

func testObjects(t *testing.T, k *cluster, d *kube.Driver) {
	ctx := context.Background()
	c := k.c
	var log platformtest.SyncBuffer
	// Its web instances listen, and so are ready, 5 s after they start:
	// long enough to see the rollout in progress.
	rel1 := shopRelease(1, k.image1)
	rel1.Env["LISTEN_DELAY"] = "5s"
	done := deploy(d, rel1, &log)

	web := getDeployment(t, c, "shop-web", release("1"))
	worker := getDeployment(t, c, "shop-worker", release("1"))

	wantLabels := map[string]string{
		"app.kubernetes.io/name": "shop", "app.kubernetes.io/managed-by": "bex", "app.kubernetes.io/component": "web",
		"bex.co/app": "shop", "bex.co/tenant": "acme", "bex.co/process": "web", "bex.co/release": "1",
	}
	for k, v := range wantLabels {
		if web.Labels[k] != v || web.Spec.Template.Labels[k] != v {
			t.Errorf("label %s: deployment %q, template %q, want %q", k, web.Labels[k], web.Spec.Template.Labels[k], v)
		}
	}
	if sel := web.Spec.Selector.MatchLabels; len(sel) != 2 || sel["bex.co/app"] != "shop" || sel["bex.co/process"] != "web" {
		t.Errorf("selector %v", sel)
	}
	if replicas(web) != 2 || replicas(worker) != 1 {
		t.Errorf("replicas web %d worker %d", replicas(web), replicas(worker))
	}
	ru := web.Spec.Strategy.RollingUpdate
	if web.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxUnavailable.IntValue() != 0 || ru.MaxSurge.IntValue() != 1 {
		t.Errorf("strategy %+v", web.Spec.Strategy)
	}
	ctr := web.Spec.Template.Spec.Containers[0]
	if ctr.Name != "web" || ctr.Image != k.image1 || strings.Join(ctr.Command, " ") != "/bin/sh -c ./testapp" {
		t.Errorf("container %s image %s command %q", ctr.Name, ctr.Image, ctr.Command)
	}
	var env []string
	for _, e := range ctr.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	if got, want := strings.Join(env, " "), "HOME=/tmp PORT=8080"; got != want {
		t.Errorf("env %q, want %q (HOME and PORT set by the driver, the release's env in its Secret, the image's own environment left to the image)", got, want)
	}
	if len(ctr.EnvFrom) != 1 || ctr.EnvFrom[0].SecretRef == nil || ctr.EnvFrom[0].SecretRef.Name != "shop-env-1" {
		t.Errorf("envFrom %+v, want the Secret shop-env-1", ctr.EnvFrom)
	}
	var envSecret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "shop-env-1"}, &envSecret); err != nil {
		t.Fatal(err)
	}
	if len(envSecret.Data) != 3 || string(envSecret.Data["A_VAR"]) != "a" || string(envSecret.Data["B_VAR"]) != "b" || string(envSecret.Data["LISTEN_DELAY"]) != "5s" {
		t.Errorf("secret data %q, want A_VAR, B_VAR and LISTEN_DELAY (PORT is the driver's)", envSecret.Data)
	}
	if len(ctr.Ports) != 1 || ctr.Ports[0].ContainerPort != 8080 || ctr.Ports[0].Name != "http" {
		t.Errorf("ports %+v", ctr.Ports)
	}
	p := ctr.ReadinessProbe
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.IntValue() != 8080 ||
		p.TimeoutSeconds != 2 || p.PeriodSeconds != 2 || p.SuccessThreshold != 1 || p.FailureThreshold != 4 {
		t.Errorf("readiness probe %+v", p)
	}
	// Until the check first passes it runs every second, for the default
	// StartTimeout of 60 s, so that a web pod is ready as soon as it
	// listens rather than at the next readiness probe.
	if s := ctr.StartupProbe; s == nil || s.HTTPGet == nil || s.HTTPGet.Path != "/healthz" || s.HTTPGet.Port.IntValue() != 8080 ||
		s.TimeoutSeconds != 2 || s.PeriodSeconds != 1 || s.SuccessThreshold != 1 || s.FailureThreshold != 60 {
		t.Errorf("startup probe %+v", s)
	}
	if cpu := ctr.Resources.Limits[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("250m")) != 0 {
		t.Errorf("cpu limit %s", cpu.String())
	}
	if mem := ctr.Resources.Requests[corev1.ResourceMemory]; mem.Cmp(resource.MustParse("256Mi")) != 0 {
		t.Errorf("memory request %s", mem.String())
	}
	// A deleted web pod keeps serving for the default DrainDelay, then has
	// the default GracePeriod to stop; nothing routes to a worker.
	if l := ctr.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds != 5 ||
		l.PreStop.Exec != nil || l.PreStop.HTTPGet != nil || l.PostStart != nil {
		t.Errorf("web lifecycle %+v, want a preStop sleep of 5s and nothing else", l)
	}
	if g := web.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 35 {
		t.Errorf("web terminationGracePeriodSeconds %v, want 35 (the preStop sleep's 5 and 30 to stop)", g)
	}
	wctr := worker.Spec.Template.Spec.Containers[0]
	if wctr.ReadinessProbe != nil || wctr.StartupProbe != nil || len(wctr.Ports) != 0 || wctr.Lifecycle != nil {
		t.Errorf("the worker has a probe, ports or a lifecycle: %+v", wctr)
	}
	if g := worker.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("worker terminationGracePeriodSeconds %v, want 30", g)
	}
	for _, e := range wctr.Env {
		if e.Name == "PORT" {
			t.Errorf("the worker has PORT")
		}
	}
	managers := map[string]metav1.ManagedFieldsOperationType{}
	for _, mf := range web.ManagedFields {
		managers[mf.Manager] = mf.Operation
	}
	if managers["bex"] != metav1.ManagedFieldsOperationApply {
		t.Errorf("managed fields %v, want bex applying", managers)
	}

	var svc corev1.Service
	platformtest.Eventually(t, 30*time.Second, "service", func(context.Context) error {
		return c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "shop"}, &svc)
	})
	if svc.Spec.Selector["bex.co/app"] != "shop" || svc.Spec.Selector["bex.co/process"] != "web" || len(svc.Spec.Ports) != 1 ||
		svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("service %+v", svc.Spec)
	}
	// The edge routes to what these selectors select, and to nothing else.
	if !kube.AppServiceSelector().Matches(labels.Set(svc.Labels)) || svc.Labels[kube.LabelApp] != svc.Name {
		t.Errorf("the app's Service %v is not what %s selects, named after the app", svc.Labels, kube.AppServiceSelector())
	}
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: "acme"}, &ns); err != nil {
		t.Fatal(err)
	}
	if !kube.TenantNamespaceSelector().Matches(labels.Set(ns.Labels)) {
		t.Errorf("the tenant's namespace %v is not what %s selects", ns.Labels, kube.TenantNamespaceSelector())
	}
	var pdb policyv1.PodDisruptionBudget
	platformtest.Eventually(t, 30*time.Second, "pdb", func(context.Context) error {
		return c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "shop-web"}, &pdb)
	})
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["bex.co/process"] != "web" {
		t.Errorf("pdb %+v", pdb.Spec)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "shop-worker"}, &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
		t.Errorf("a one-replica worker got a PDB: %v", err)
	}

	// Deploy waits for the rollout; Status says where it stands.
	st, err := d.Status(ctx, "acme", "shop")
	if err != nil || st.Ready || st.Release != 1 {
		t.Errorf("Status before the rollout: %+v, %v", st, err)
	}
	select {
	case err := <-done:
		t.Fatalf("Deploy returned before the rollout: %v", err)
	default:
	}
	// A Deployment's first rollout makes all its Pods at once: they are
	// there, not yet available, while the app starts. (A release's
	// rollout surges one Pod at a time: "1 of 2 new instances started";
	// the suite's Scale and Restart cases see those.)
	platformtest.Eventually(t, 30*time.Second, "Status reads a rollout in progress", func(context.Context) error {
		st, err := d.Status(ctx, "acme", "shop")
		if err != nil {
			return err
		}
		if st.Ready || !strings.Contains(st.Message, "web: 0 of 2 new instances available") {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	if err := <-done; err != nil {
		t.Fatalf("Deploy: %v\n%s", err, log.String())
	}
	st, err = d.Status(ctx, "acme", "shop")
	if err != nil || !st.Ready || st.Release != 1 || st.Message != "release 1: 3 of 3 instances running" {
		t.Errorf("Status after the rollout: %+v, %v", st, err)
	}

	// Release 2: a new image, one web replica, no worker.
	rel2 := shopRelease(2, k.image2)
	rel2.Processes = map[string]runtime.Process{runtime.WebProcess: {Command: "./testapp", Replicas: 1}}
	done = deploy(d, rel2, &log)
	web = getDeployment(t, c, "shop-web", release("2"))
	if img := web.Spec.Template.Spec.Containers[0].Image; img != k.image2 || replicas(web) != 1 || web.Labels[kube.LabelRelease] != "2" {
		t.Errorf("release 2: image %s, replicas %d, labels %v", img, replicas(web), web.Labels)
	}
	if err := <-done; err != nil {
		t.Fatalf("Deploy of release 2: %v\n%s", err, log.String())
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "shop-worker"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the worker deployment outlived release 2: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "shop-web"}, &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
		t.Errorf("the web PDB outlived the second replica: %v", err)
	}
	// Release 1's instances keep serving through their preStop sleep
	// (DrainDelay) before they stop: then release 2's instance is alone.
	platformtest.Eventually(t, time.Minute, "Status of release 2, its one instance alone", func(context.Context) error {
		st, err = d.Status(ctx, "acme", "shop")
		if err != nil || !st.Ready || st.Release != 2 || len(st.Instances) != 1 {
			return fmt.Errorf("%+v, %v", st, err)
		}
		return nil
	})
	// Its app crashes twice; the node restarts it in place each time.
	crash(t, c, "acme", st.Instances[0].ID)
	crash(t, c, "acme", st.Instances[0].ID)
	st, err = d.Status(ctx, "acme", "shop")
	if err != nil || len(st.Instances) != 1 {
		t.Fatalf("Status of release 2 after two crashes: %+v, %v", st, err)
	}
	if i := st.Instances[0]; i.Process != "web" || i.Index != 0 || i.Release != 2 || i.State != runtime.Running || i.Restarts != 2 {
		t.Errorf("instance %+v", i)
	}

	// Release 2 again with other resources, as a change of plan hands it
	// over (bex scale --plan standard): the pod template gets them as its
	// requests and limits, so that the Deployment rolls its pods.
	standard := rel2
	standard.Resources = runtime.Resources{CPU: "1", Memory: "2Gi"}
	done = deploy(d, standard, &log)
	web = getDeployment(t, c, "shop-web", func(dep *appsv1.Deployment) error {
		res := dep.Spec.Template.Spec.Containers[0].Resources
		for _, l := range []corev1.ResourceList{res.Requests, res.Limits} {
			if cpu, mem := l[corev1.ResourceCPU], l[corev1.ResourceMemory]; cpu.Cmp(resource.MustParse("1")) != 0 || mem.Cmp(resource.MustParse("2Gi")) != 0 {
				return fmt.Errorf("pod template resources %+v, want requests and limits of cpu 1, memory 2Gi", res)
			}
		}
		return nil
	})
	if rel := web.Spec.Template.Labels[kube.LabelRelease]; rel != "2" || replicas(web) != 1 {
		t.Errorf("release 2 on standard: template of release %q, %d replicas; want release 2, 1 replica", rel, replicas(web))
	}
	if err := <-done; err != nil {
		t.Fatalf("Deploy of release 2 with new resources: %v\n%s", err, log.String())
	}
	t.Logf("deploy log:\n%s", log.String())

	if err := d.Remove(ctx, "acme", "shop"); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
		name := "shop-web"
		if _, ok := obj.(*corev1.Service); ok {
			name = "shop"
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: name}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after Remove: %v", obj, name, err)
		}
	}
	if _, err := d.Status(ctx, "acme", "shop"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Status after Remove: %v", err)
	}
}

// testRolloutDeadlineWhileThrottled: a release whose Deployment never
// rolls out (its image cannot be pulled) fails with the deadline and
// where it stood, also when the client's rate limiter refuses the last
// read because its turn would come after the deadline.
func testRolloutDeadlineWhileThrottled(t *testing.T, k *cluster, d *kube.Driver) {
	rel := shopRelease(1, k.Registry+"/acme/nothing:1")
	rel.App = "slow"
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Command: "./testapp", Replicas: 1}}
	var log platformtest.SyncBuffer
	err := <-deploy(d, rel, &log)
	if err == nil || !strings.Contains(err.Error(), "not rolled out before the deadline (web: ") || strings.Contains(err.Error(), "rate limiter") {
		t.Errorf("deploying a release that never rolls out with a throttled client: %v, want it not rolled out before the deadline, saying where web stood", err)
	}
}

// testRunStartDeadlineWhileThrottled: a run whose Pod never starts (it
// asks for more CPU than the node has: the scheduler cannot place it)
// fails with the start deadline, also when the client's rate limiter
// refuses the last read because its turn would come after the deadline.
func testRunStartDeadlineWhileThrottled(t *testing.T, k *cluster, d *kube.Driver) {
	ctx := context.Background()
	const ns = "throttledrun"
	if err := d.PrepareNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	defaultServiceAccount(t, k.c, ns)
	rel := shopRelease(1, k.image1)
	rel.Tenant = ns
	rel.Resources.CPU = "64"
	_, err := d.Run(ctx, rel, runtime.Command{Args: []string{"./migrate"}, Name: "release", Attach: func(int) (runtime.Streams, error) {
		return runtime.Streams{}, nil
	}})
	if err == nil || !strings.Contains(err.Error(), "not started after 3s") || strings.Contains(err.Error(), "rate limiter") {
		t.Errorf("a run that never starts with a throttled client: %v, want it not started after 3s", err)
	}
}

// testFailedRollout: a release whose app fails its health check is not
// deployed: once the deployment controller gives up on it (its progress
// deadline), the error says why, with the probe's failure the node
// reported, and the previous release is back; a failed first release
// leaves nothing behind.
func testFailedRollout(t *testing.T, k *cluster, d *kube.Driver) {
	ctx := context.Background()
	c := k.c
	var log platformtest.SyncBuffer
	rel1 := shopRelease(1, k.image1)
	rel1.App = "cart"
	rel1.Processes = map[string]runtime.Process{runtime.WebProcess: {Command: "./testapp", Replicas: 1}}
	remove(t, d, "acme", "cart")
	if err := d.Deploy(ctx, rel1, &log); err != nil {
		t.Fatal(err)
	}

	rel2 := rel1
	rel2.Number, rel2.Image = 2, k.image2
	rel2.Env = maps.Clone(rel1.Env)
	rel2.Env[runtimetest.EnvFailHealth] = "1"
	rel2.Processes = map[string]runtime.Process{runtime.WebProcess: {Command: "./testapp", Replicas: 2}}
	done := deploy(d, rel2, &log)
	getDeployment(t, c, "cart-web", release("2"))
	platformtest.Eventually(t, 30*time.Second, "release 2 has a PDB", func(context.Context) error {
		return c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "cart-web"}, &policyv1.PodDisruptionBudget{})
	})
	err := <-done
	if err == nil {
		t.Fatal("Deploy succeeded although the rollout failed")
	}
	// The error names the new ReplicaSet and why one of its Pods is not
	// ready: what the node reports of it then (its probe's failure, or a
	// container the node cannot create yet: the Node authorizer lets it
	// read the Pod's Secret a moment after the Pod is bound).
	rs := regexp.MustCompile(`ReplicaSet \\?"(cart-web-[a-z0-9]+)\\?"`).FindStringSubmatch(err.Error())
	if rs == nil {
		t.Fatalf("Deploy error %q names no ReplicaSet of cart-web", err)
	}
	for _, want := range []string{"release 2 not deployed", "web did not become ready in time", "has timed out progressing", "; pod " + rs[1] + "-"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Deploy error %q lacks %q", err, want)
		}
	}
	// Until the check first passes the startup probe runs it, not the
	// readiness probe: a check that never passes fails the startup probe,
	// Unhealthy events of the node on the new Pods, each failure counted
	// as the kubelet counts them (one Event per Pod and words, its count
	// going up), so that the error says the latest.
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace("acme")); err != nil {
		t.Fatal(err)
	}
	var counted int32
	for _, e := range events.Items {
		if e.Reason == "Unhealthy" && strings.HasPrefix(e.InvolvedObject.Name, rs[1]+"-") && strings.HasPrefix(e.Message, "Startup probe failed: ") {
			counted = max(counted, e.Count)
		}
	}
	if counted < 3 {
		t.Errorf("the Unhealthy events of a failed startup probe on the Pods of %s count %d failures at most, want each of the failures in the 20 s progress deadline", rs[1], counted)
	}
	// The previous release is back.
	web := getDeployment(t, c, "cart-web", release("1"))
	if img := web.Spec.Template.Spec.Containers[0].Image; img != k.image1 || web.Labels[kube.LabelRelease] != "1" || replicas(web) != 1 {
		t.Errorf("after the failed rollout: image %s, labels %v, replicas %d", img, web.Labels, replicas(web))
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "cart-web"}, &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
		t.Errorf("the PDB of the failed release stayed: %v", err)
	}
	if !strings.Contains(log.String(), "Release 1 keeps serving") {
		t.Errorf("log:\n%s", log.String())
	}

	// A failed first release leaves nothing behind.
	rel := shopRelease(1, k.image1)
	rel.App = "fresh"
	rel.Env[runtimetest.EnvFailHealth] = "1"
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Command: "./testapp", Replicas: 1}}
	if err := d.Deploy(ctx, rel, &log); err == nil {
		t.Fatal("Deploy succeeded although the rollout failed")
	}
	platformtest.Eventually(t, 30*time.Second, "nothing of the failed first release", func(context.Context) error {
		if _, err := d.Status(ctx, "acme", "fresh"); !errors.Is(err, runtime.ErrNotFound) {
			return fmt.Errorf("Status: %v", err)
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "fresh"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("service: %v", err)
		}
		return nil
	})
}

// defaultServiceAccount creates what the service account controller
// would, unless it has already.
func defaultServiceAccount(t *testing.T, c client.Client, ns string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	if err := c.Create(context.Background(), sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
