package kube_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
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
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/internal/steptime"
	"bex.co/bex/test/platformtest"
)

func TestKubeDriver(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	cp := cptest.StartBare(t)
	cfg := cp.RESTConfig()
	c := newClient(t, cfg)
	newDriverWith := func(t *testing.T, opts kube.Options) *kube.Driver {
		opts.PollInterval, opts.ProgressDeadline = 50*time.Millisecond, 30*time.Second
		d, err := kube.New(cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	newDriver := func(t *testing.T) *kube.Driver { return newDriverWith(t, kube.Options{}) }

	t.Run("Suite", func(t *testing.T) {
		simulate(t, c, "suite")
		runtimetest.RunDriverSuite(t, func(t *testing.T) runtime.Driver { return newDriver(t) }, runtimetest.Harness{
			Complete: func(t *testing.T, rel runtime.Release) runtime.Release {
				rel.Image = fmt.Sprintf("registry.bex.test/%s/%s:%d", rel.Tenant, rel.App, rel.Number)
				return runtimetest.WithWorkerCommands(rel)
			},
			Crash: func(t *testing.T, _ runtime.Driver, tenant, _ string, inst runtime.Instance) {
				crashPod(t, c, tenant, inst.ID)
			},
			Metrics: func(t *testing.T, d runtime.Driver) (prometheus.Collector, string) {
				return kubeMetrics(t, d.(*kube.Driver)), kube.DriverLabel
			},
			// The simulated kubelet runs no container, so no log either:
			// node's TestKubeDriverSuiteOnTheNode runs the Run case.
			NoRun: true,
		})
	})
	t.Run("Objects", func(t *testing.T) { testObjects(t, c, newDriver(t)) })
	t.Run("Timings", func(t *testing.T) { testTimings(t, c, newDriver(t)) })
	t.Run("RolloutSeenByWatch", func(t *testing.T) {
		d, err := kube.New(cfg, kube.Options{PollInterval: time.Hour, ProgressDeadline: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		testRolloutSeenByWatch(t, c, d)
	})
	t.Run("FailedRolloutRestoresPrevious", func(t *testing.T) { testFailedRollout(t, c, newDriver(t)) })
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
	t.Run("RolloutDeadlineWhileThrottled", func(t *testing.T) {
		testRolloutDeadlineWhileThrottled(t, throttled(t, kube.Options{RolloutTimeout: 3 * time.Second}))
	})
	t.Run("RunStartDeadlineWhileThrottled", func(t *testing.T) {
		testRunStartDeadlineWhileThrottled(t, c, throttled(t, kube.Options{RunStartTimeout: 3 * time.Second}))
	})
	t.Run("Logs", func(t *testing.T) { testLogs(t, c, newDriver(t)) })
	t.Run("EnvSecrets", func(t *testing.T) { testEnvSecrets(t, c, newDriver(t)) })
	t.Run("Watch", func(t *testing.T) { testWatch(t, c, newDriver(t)) })
	t.Run("Metrics", func(t *testing.T) { testMetrics(t, c, newDriver(t)) })
	t.Run("TenantNamespace", func(t *testing.T) { testTenantNamespace(t, c, newDriverWith) })
	t.Run("PreparedNamespaces", func(t *testing.T) { testPreparedNamespaces(t, c, newDriverWith) })
	t.Run("BuildPods", func(t *testing.T) {
		testBuildPods(t, c, newDriverWith(t, kube.Options{RunStartTimeout: 2 * time.Second}))
	})
	t.Run("RunSweep", func(t *testing.T) {
		testRunSweep(t, c, newDriverWith(t, kube.Options{RunLogRetention: 10 * time.Minute}))
	})
	t.Run("EndRun", func(t *testing.T) { testEndRun(t, c, newDriver(t)) })
	t.Run("InvalidResources", func(t *testing.T) {
		d := newDriver(t)
		rel := shopRelease(1, "img:1")
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

// simulate plays the deployment controller, the replica sets and the
// kubelet for a namespace: every Deployment whose status lags its generation
// gets a finished rollout and ready pods of its template, except when its
// pods would fail their readiness probe (the test app's FAIL_HEALTH=1),
// which gets ProgressDeadlineExceeded and keeps its old pods. Pods of
// deleted Deployments go.
func simulate(t *testing.T, c client.Client, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var deps appsv1.DeploymentList
			if err := c.List(ctx, &deps, client.InNamespace(ns)); err != nil {
				continue
			}
			live := map[string]bool{}
			for i := range deps.Items {
				dep := &deps.Items[i]
				live[dep.Spec.Selector.MatchLabels[kube.LabelProcess]+"/"+dep.Spec.Selector.MatchLabels[kube.LabelApp]] = true
				if dep.Status.ObservedGeneration == dep.Generation {
					continue
				}
				if failsHealth(ctx, c, dep) {
					rolloutFailed(dep)
				} else {
					if err := runPods(ctx, c, dep); err != nil {
						continue
					}
					rolledOut(dep)
				}
				_ = c.Status().Update(ctx, dep)
			}
			var pods corev1.PodList
			if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
				continue
			}
			for i := range pods.Items {
				if !live[pods.Items[i].Labels[kube.LabelProcess]+"/"+pods.Items[i].Labels[kube.LabelApp]] {
					_ = c.Delete(ctx, &pods.Items[i])
				}
			}
		}
	})
}

// crashPod plays the kubelet restarting the pod's crashed container: its
// restart count goes up, its last termination is an exit, and its
// container runs again from now.
func crashPod(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var pod corev1.Pod
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
			return err
		}
		now := metav1.Now()
		for i := range pod.Status.ContainerStatuses {
			cs := &pod.Status.ContainerStatuses[i]
			cs.RestartCount++
			cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 4, Reason: "Error", FinishedAt: now}}
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
		}
		return c.Status().Update(context.Background(), &pod)
	})
	if err != nil {
		t.Fatalf("crashing pod %s/%s: %v", ns, name, err)
	}
}

// runPods makes the pods of dep ready ones of its template, named after
// the template as a ReplicaSet's are: a new template (a release, a
// restart) replaces every pod, another replica count adds the pods
// missing or deletes the last ones and keeps the others.
func runPods(ctx context.Context, c client.Client, dep *appsv1.Deployment) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: dep.Namespace, Name: "default"}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(dep.Namespace), client.MatchingLabels(dep.Spec.Selector.MatchLabels)); err != nil {
		return err
	}
	h := fnv.New32a()
	fmt.Fprint(h, dep.Spec.Template.Labels[kube.LabelRelease], "/", dep.Spec.Template.Annotations[kube.AnnotationRestart])
	prefix := fmt.Sprintf("%s-%s-%x-", dep.Name, dep.Spec.Template.Labels[kube.LabelRelease], h.Sum32())
	have := map[string]bool{}
	for i := range pods.Items {
		name := pods.Items[i].Name
		idx, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		if strings.HasPrefix(name, prefix) && err == nil && idx < int(replicas(dep)) {
			have[name] = true
			continue
		}
		if err := c.Delete(ctx, &pods.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for i := range replicas(dep) {
		if have[fmt.Sprintf("%s%d", prefix, i)] {
			continue
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: dep.Namespace, Name: fmt.Sprintf("%s%d", prefix, i), Labels: dep.Spec.Template.Labels},
			Spec:       dep.Spec.Template.Spec,
		}
		if err := c.Create(ctx, pod); err != nil {
			return err
		}
		now := metav1.Now()
		pod.Status = corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
		}
		for _, ctr := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: ctr.Name, Image: ctr.Image, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		if err := c.Status().Update(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}

// failsHealth reads the test app's FAIL_HEALTH where the kubelet would:
// in the containers' env and the Secrets of their envFrom.
func failsHealth(ctx context.Context, c client.Client, dep *appsv1.Deployment) bool {
	for _, ctr := range dep.Spec.Template.Spec.Containers {
		for _, e := range ctr.Env {
			if e.Name == runtimetest.EnvFailHealth && e.Value == "1" {
				return true
			}
		}
		for _, from := range ctr.EnvFrom {
			if from.SecretRef == nil {
				continue
			}
			var sec corev1.Secret
			if err := c.Get(ctx, client.ObjectKey{Namespace: dep.Namespace, Name: from.SecretRef.Name}, &sec); err == nil && string(sec.Data[runtimetest.EnvFailHealth]) == "1" {
				return true
			}
		}
	}
	return false
}

func replicas(dep *appsv1.Deployment) int32 {
	if dep.Spec.Replicas == nil {
		return 1
	}
	return *dep.Spec.Replicas
}

func rolledOut(dep *appsv1.Deployment) {
	n := replicas(dep)
	now := metav1.Now()
	dep.Status = appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: fmt.Sprintf("ReplicaSet %q has successfully progressed.", dep.Name+"-abc"), LastUpdateTime: now, LastTransitionTime: now},
		},
	}
}

func rolloutFailed(dep *appsv1.Deployment) {
	n := replicas(dep)
	now := metav1.Now()
	dep.Status = appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation, Replicas: n + 1, UpdatedReplicas: 1, ReadyReplicas: n, AvailableReplicas: n, UnavailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: fmt.Sprintf("ReplicaSet %q has timed out progressing.", dep.Name+"-def"), LastUpdateTime: now, LastTransitionTime: now},
		},
	}
}

// setStatus rewrites a Deployment's status with f, as its controller would.
func setStatus(t *testing.T, c client.Client, ns, name string, f func(*appsv1.Deployment)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var dep appsv1.Deployment
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
			return err
		}
		f(&dep)
		return c.Status().Update(context.Background(), &dep)
	})
	if err != nil {
		t.Fatalf("writing status of %s: %v", name, err)
	}
}

func shopRelease(number int, image string) runtime.Release {
	return runtime.Release{
		Tenant: "acme", App: "shop", Number: number, Image: image,
		Env: map[string]string{"B_VAR": "b", "A_VAR": "a", "PORT": "9999"},
		// The image's environment as an unpacked copy on the platform's
		// machine sees it: host paths, which a container must not get.
		ImageEnv: map[string]string{"PATH": "/var/lib/bex/releases/acme/shop/v1/bin:/usr/bin", "VIRTUAL_ENV": "/var/lib/bex/releases/acme/shop/v1/.venv"},
		Processes: map[string]runtime.Process{
			runtime.WebProcess: {Command: "./server --web", Replicas: 2},
			"worker":           {Command: "./server --worker", Replicas: 1},
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

// testTimings checks that a deploy times its steps in the push's
// timeline, the rollout from the Deployment's write to its rolled-out
// status.
func testTimings(t *testing.T, c client.Client, d *kube.Driver) {
	rel := shopRelease(1, "img:1")
	rel.App = "clock"
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Replicas: 1}}
	ctx, tl := steptime.New(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Deploy(ctx, rel, io.Discard) }()
	getDeployment(t, c, "clock-web", release("1"))
	// The rollout step began before the Deployment could be read: it
	// lasts at least as long as its status is held back.
	const held = 300 * time.Millisecond
	time.Sleep(held)
	setStatus(t, c, "acme", "clock-web", rolledOut)
	if err := <-done; err != nil {
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
		t.Errorf("rollout step %s, want at least the %s its status was held back", steptime.Seconds(rollout), held)
	}
}

// testRolloutSeenByWatch checks that a deploy ends as soon as its
// Deployment reports the rollout done, however far its next poll is (d
// polls once an hour).
func testRolloutSeenByWatch(t *testing.T, c client.Client, d *kube.Driver) {
	rel := shopRelease(1, "img:1")
	rel.App = "watched"
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Replicas: 1}}
	var log platformtest.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- d.Deploy(context.Background(), rel, &log) }()
	platformtest.Eventually(t, 30*time.Second, "the deploy waiting for its rollout", func(context.Context) error {
		if !strings.Contains(log.String(), "Waiting for web") {
			return fmt.Errorf("log %q", log.String())
		}
		return nil
	})
	setStatus(t, c, "acme", "watched-web", rolledOut)
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

func testObjects(t *testing.T, c client.Client, d *kube.Driver) {
	ctx := context.Background()
	var log platformtest.SyncBuffer
	done := deploy(d, shopRelease(1, "registry.bex.test/acme/shop@sha256:1111"), &log)

	web := getDeployment(t, c, "shop-web", release("1"))
	defaultServiceAccount(t, c, "acme")
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
	if ctr.Name != "web" || ctr.Image != "registry.bex.test/acme/shop@sha256:1111" || strings.Join(ctr.Command, " ") != "/bin/sh -c ./server --web" {
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
	if len(envSecret.Data) != 2 || string(envSecret.Data["A_VAR"]) != "a" || string(envSecret.Data["B_VAR"]) != "b" {
		t.Errorf("secret data %q, want A_VAR and B_VAR (PORT is the driver's)", envSecret.Data)
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
	setStatus(t, c, "acme", "shop-web", func(dep *appsv1.Deployment) {
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 0}
	})
	platformtest.Eventually(t, 30*time.Second, "Status reads a rollout in progress", func(context.Context) error {
		st, err := d.Status(ctx, "acme", "shop")
		if err != nil {
			return err
		}
		if st.Ready || !strings.Contains(st.Message, "web: 1 of 2 new instances started") {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	setStatus(t, c, "acme", "shop-web", rolledOut)
	setStatus(t, c, "acme", "shop-worker", rolledOut)
	if err := <-done; err != nil {
		t.Fatalf("Deploy: %v\n%s", err, log.String())
	}
	st, err = d.Status(ctx, "acme", "shop")
	if err != nil || !st.Ready || st.Release != 1 || st.Message != "release 1: web: 2 of 2 instances available, worker: 1 of 1 instances available" {
		t.Errorf("Status after the rollout: %+v, %v", st, err)
	}

	// Release 2: a new image, one web replica, no worker.
	rel2 := shopRelease(2, "registry.bex.test/acme/shop@sha256:2222")
	rel2.Processes = map[string]runtime.Process{runtime.WebProcess: {Command: "./server --web", Replicas: 1}}
	done = deploy(d, rel2, &log)
	web = getDeployment(t, c, "shop-web", release("2"))
	if img := web.Spec.Template.Spec.Containers[0].Image; img != "registry.bex.test/acme/shop@sha256:2222" || replicas(web) != 1 || web.Labels[kube.LabelRelease] != "2" {
		t.Errorf("release 2: image %s, replicas %d, labels %v", img, replicas(web), web.Labels)
	}
	// An instance of release 2, to read back (no kubelet runs pods here).
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "shop-web-2-x", Labels: web.Spec.Template.Labels},
		Spec:       web.Spec.Template.Spec,
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "web", Ready: true, RestartCount: 2, Image: "x",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
		}},
	}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	setStatus(t, c, "acme", "shop-web", rolledOut)
	if err := <-done; err != nil {
		t.Fatalf("Deploy of release 2: %v\n%s", err, log.String())
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "shop-worker"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the worker deployment outlived release 2: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "shop-web"}, &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
		t.Errorf("the web PDB outlived the second replica: %v", err)
	}
	st, err = d.Status(ctx, "acme", "shop")
	if err != nil || !st.Ready || st.Release != 2 || len(st.Instances) != 1 {
		t.Fatalf("Status of release 2: %+v, %v", st, err)
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
	setStatus(t, c, "acme", "shop-web", rolledOut)
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
// rolls out (no kubelet here) fails with the deadline and where it stood,
// also when the client's rate limiter refuses the last read because its
// turn would come after the deadline.
func testRolloutDeadlineWhileThrottled(t *testing.T, d *kube.Driver) {
	rel := shopRelease(1, "img:1")
	rel.App = "slow"
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Replicas: 1}}
	var log platformtest.SyncBuffer
	err := <-deploy(d, rel, &log)
	if err == nil || !strings.Contains(err.Error(), "not rolled out before the deadline (web: ") || strings.Contains(err.Error(), "rate limiter") {
		t.Errorf("deploying a release that never rolls out with a throttled client: %v, want it not rolled out before the deadline, saying where web stood", err)
	}
}

// testRunStartDeadlineWhileThrottled: a run whose Pod never starts (no
// scheduler here) fails with the start deadline, also when the client's
// rate limiter refuses the last read because its turn would come after
// the deadline.
func testRunStartDeadlineWhileThrottled(t *testing.T, c client.Client, d *kube.Driver) {
	ctx := context.Background()
	const ns = "throttledrun"
	if err := d.PrepareNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	defaultServiceAccount(t, c, ns)
	rel := shopRelease(1, "img:1")
	rel.Tenant = ns
	_, err := d.Run(ctx, rel, runtime.Command{Args: []string{"./migrate"}, Name: "release", Attach: func(int) (runtime.Streams, error) {
		return runtime.Streams{}, nil
	}})
	if err == nil || !strings.Contains(err.Error(), "not started after 3s") || strings.Contains(err.Error(), "rate limiter") {
		t.Errorf("a run that never starts with a throttled client: %v, want it not started after 3s", err)
	}
}

func testFailedRollout(t *testing.T, c client.Client, d *kube.Driver) {
	ctx := context.Background()
	var log platformtest.SyncBuffer
	rel1 := shopRelease(1, "img:1")
	rel1.App = "cart"
	rel1.Processes = map[string]runtime.Process{runtime.WebProcess: {Replicas: 1}}
	done := deploy(d, rel1, &log)
	getDeployment(t, c, "cart-web", release("1"))
	setStatus(t, c, "acme", "cart-web", rolledOut)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	rel2 := rel1
	rel2.Number, rel2.Image = 2, "img:2"
	rel2.Processes = map[string]runtime.Process{runtime.WebProcess: {Replicas: 2}}
	done = deploy(d, rel2, &log)
	web := getDeployment(t, c, "cart-web", release("2"))
	platformtest.Eventually(t, 30*time.Second, "release 2 has a PDB", func(context.Context) error {
		return c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "cart-web"}, &policyv1.PodDisruptionBudget{})
	})
	// A pod of release 2 whose readiness probe fails, as the kubelet reports it.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "cart-web-2-a", Labels: web.Spec.Template.Labels}, Spec: web.Spec.Template.Spec}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "acme", Name: "cart-web-2-a.unhealthy"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "acme", Name: "cart-web-2-a"},
		Reason:         "Unhealthy", Type: corev1.EventTypeWarning,
		Message:       "Readiness probe failed: HTTP probe failed with statuscode: 500",
		LastTimestamp: metav1.Now(),
	}
	if err := c.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}
	setStatus(t, c, "acme", "cart-web", rolloutFailed)
	err := <-done
	if err == nil {
		t.Fatal("Deploy succeeded although the rollout failed")
	}
	for _, want := range []string{"release 2 not deployed", "web did not become ready in time", "ProgressDeadlineExceeded", "Readiness probe failed: HTTP probe failed with statuscode: 500"} {
		if want == "ProgressDeadlineExceeded" {
			want = "has timed out progressing"
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Deploy error %q lacks %q", err, want)
		}
	}
	// The previous release is back.
	web = getDeployment(t, c, "cart-web", release("1"))
	if img := web.Spec.Template.Spec.Containers[0].Image; img != "img:1" || web.Labels[kube.LabelRelease] != "1" || replicas(web) != 1 {
		t.Errorf("after the failed rollout: image %s, labels %v, replicas %d", img, web.Labels, replicas(web))
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "cart-web"}, &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
		t.Errorf("the PDB of the failed release stayed: %v", err)
	}
	if !strings.Contains(log.String(), "Release 1 keeps serving") {
		t.Errorf("log:\n%s", log.String())
	}

	// A failed first release leaves nothing behind.
	rel := shopRelease(1, "img:1")
	rel.App = "fresh"
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Replicas: 1}}
	done = deploy(d, rel, &log)
	getDeployment(t, c, "fresh-web", release("1"))
	setStatus(t, c, "acme", "fresh-web", rolloutFailed)
	if err := <-done; err == nil {
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

// defaultServiceAccount creates what the service account controller would.
func defaultServiceAccount(t *testing.T, c client.Client, ns string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	if err := c.Create(context.Background(), sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
