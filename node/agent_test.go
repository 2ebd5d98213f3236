package node_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/pki"
	"bex.co/bex/internal/registry"
	"bex.co/bex/node"
	"bex.co/bex/node/nodetest"
	"bex.co/bex/test/platformtest"
)

const (
	nodeName      = nodetest.NodeName
	registryToken = nodetest.RegistryToken
	kubeletClient = nodetest.KubeletClient
)

// fixture is nodetest's: a real apiserver with the Node authorizer and
// NodeRestriction, a controller manager and a scheduler, a registry that
// wants its token, and an agent that talks to the apiserver as its node
// and runs containers with runc; with the helpers of node's own tests.
type fixture struct{ *nodetest.Fixture }

// start starts the fixture; configure, when given, changes the agent's
// options.
func start(t *testing.T, configure ...func(f *fixture, o *node.Options)) *fixture {
	t.Helper()
	return &fixture{nodetest.Start(t, func(nf *nodetest.Fixture, o *node.Options) {
		for _, c := range configure {
			c(&fixture{nf}, o)
		}
	})}
}

// webPod is a Pod of the test app bound to the node, as the kube driver
// makes them: envFrom a Secret, PORT, a readiness and a liveness probe.
func (f *fixture) webPod(ns, name string, pullSecret string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			Containers: []corev1.Container{{
				Name:    "web",
				Image:   f.Image,
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}},
				Env:     []corev1.EnvVar{{Name: "PORT", Value: "8080"}},
				Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
					PeriodSeconds: 1, FailureThreshold: 1},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1, FailureThreshold: 2},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceCPU: resource.MustParse("500m")}},
			}},
		},
	}
	if pullSecret != "" {
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: pullSecret}}
	}
	return p
}

// staticSite builds a site of one index.html with the platform's builder
// (detected as static, no run image) and returns its image by digest.
func (f *fixture) staticSite(t *testing.T, tenant, app, index string) string {
	t.Helper()
	repo, commit := gitRepo(t, map[string]string{"index.html": index})
	b, err := build.New(build.Options{WorkRoot: t.TempDir(), CacheDir: t.TempDir(), Registry: f.Registry, RegistryAuth: registry.Auth(registryToken)})
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	res, err := b.Build(context.Background(), build.Request{Tenant: tenant, App: app, RepoDir: repo, Commit: commit}, &log)
	if err != nil {
		t.Fatalf("building the site: %v\n%s", err, log.String())
	}
	if res.Processes["web"] != "bex-static" {
		t.Fatalf("the site's web process is %q, not bex-static", res.Processes["web"])
	}
	return res.Image
}

func (f *fixture) getPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	return f.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
}

// waitDeadlineExceeded waits until the Pod has failed with
// DeadlineExceeded, its container stopped.
func (f *fixture) waitDeadlineExceeded(t *testing.T, ns, name string) {
	t.Helper()
	platformtest.Eventually(t, 60*time.Second, "the pod failed with DeadlineExceeded, its container stopped", func(ctx context.Context) error {
		p, err := f.getPod(ctx, ns, name)
		if err != nil {
			return err
		}
		cs := p.Status.ContainerStatuses
		if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "DeadlineExceeded" || len(cs) != 1 || cs[0].State.Terminated == nil {
			return fmt.Errorf("phase %s, reason %q, container statuses %+v", p.Status.Phase, p.Status.Reason, cs)
		}
		return nil
	})
}

// endpoint returns the endpoint of address ip in the EndpointSlices of
// the Service svc.
func (f *fixture) endpoint(ctx context.Context, ns, svc, ip string) (discoveryv1.Endpoint, error) {
	list, err := f.Admin.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return discoveryv1.Endpoint{}, err
	}
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if slices.Contains(e.Addresses, ip) {
				return e, nil
			}
		}
	}
	return discoveryv1.Endpoint{}, fmt.Errorf("no endpoint %s in the slices of %s/%s", ip, ns, svc)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func events(ctx context.Context, c kubernetes.Interface, ns, pod string) ([]corev1.Event, error) {
	l, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func TestAgent(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	const ns = "tenant-a"
	f.Namespace(t, ns)
	pull := f.PullSecret(t, ns)
	if _, err := f.Admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "env"}, StringData: map[string]string{"VERSION": "from-secret"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("RegistersTheNode", func(t *testing.T) {
		platformtest.Eventually(t, 30*time.Second, "the Node is Ready with its address, port and lease", func(ctx context.Context) error {
			n, err := f.Admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ready := false
			for _, c := range n.Status.Conditions {
				ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			}
			if !ready {
				return fmt.Errorf("conditions %v", n.Status.Conditions)
			}
			if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Address != "127.0.0.1" ||
				n.Status.DaemonEndpoints.KubeletEndpoint.Port != int32(f.Port) || n.Status.NodeInfo.KubeletVersion != "v1.37.2" {
				return fmt.Errorf("status %+v", n.Status)
			}
			if n.Status.Allocatable.Pods().Value() != 110 {
				return fmt.Errorf("allocatable %v", n.Status.Allocatable)
			}
			l, err := f.Admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ptr.Deref(l.Spec.HolderIdentity, "") != nodeName || l.Spec.RenewTime == nil {
				return fmt.Errorf("lease %+v", l.Spec)
			}
			return nil
		})
	})

	t.Run("RunsAPodAndServesItsLogs", func(t *testing.T) {
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, f.webPod(ns, "web-1", pull), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var ip string
		platformtest.Eventually(t, 90*time.Second, "the pod is Ready with an IP", func(ctx context.Context) error {
			p, err := f.getPod(ctx, ns, "web-1")
			if err != nil {
				return err
			}
			if !podReady(p) || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("phase %s, ip %q, conditions %v, containers %+v", p.Status.Phase, p.Status.PodIP, p.Status.Conditions, p.Status.ContainerStatuses)
			}
			ip = p.Status.PodIP
			return nil
		})
		// The Secret's VERSION wins over the image's.
		code, body, err := nodetest.Get(ctx, "http://"+ip+":8080/")
		if err != nil || code != 200 || strings.TrimSpace(body) != "from-secret" {
			t.Fatalf("GET /: %d %q %v, want 200 from-secret", code, body, err)
		}
		if _, _, err := nodetest.Get(ctx, "http://"+ip+":8080/log?msg=hello-from-web-1"); err != nil {
			t.Fatal(err)
		}
		// kubectl logs: through the apiserver, which reaches the agent
		// with its kubelet client certificate and checks the agent's.
		platformtest.Eventually(t, 20*time.Second, "the pod's log through the apiserver", func(ctx context.Context) error {
			b, err := f.Admin.CoreV1().Pods(ns).GetLogs("web-1", &corev1.PodLogOptions{TailLines: ptr.To(int64(5))}).DoRaw(ctx)
			if err != nil {
				return err
			}
			if !strings.Contains(string(b), "hello-from-web-1") {
				return fmt.Errorf("log %q", b)
			}
			return nil
		})
	})

	t.Run("FollowsALog", func(t *testing.T) {
		p, err := f.getPod(ctx, ns, "web-1")
		if err != nil {
			t.Fatal(err)
		}
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		rc, err := f.Admin.CoreV1().Pods(ns).GetLogs("web-1", &corev1.PodLogOptions{Follow: true, TailLines: ptr.To(int64(0))}).Stream(fctx)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if _, _, err := nodetest.Get(ctx, "http://"+p.Status.PodIP+":8080/log?msg=followed-line-42"); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(rc)
		for sc.Scan() {
			if sc.Text() == "followed-line-42" {
				return
			}
			t.Logf("followed: %q", sc.Text())
		}
		t.Fatalf("the line written while following never came: %v", sc.Err())
	})

	t.Run("RestartsAContainerThatFailsItsLivenessProbe", func(t *testing.T) {
		p, err := f.getPod(ctx, ns, "web-1")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := nodetest.Get(ctx, "http://"+p.Status.PodIP+":8080/sick"); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 60*time.Second, "the container restarted and is ready again", func(ctx context.Context) error {
			p, err := f.getPod(ctx, ns, "web-1")
			if err != nil {
				return err
			}
			cs := p.Status.ContainerStatuses
			if len(cs) != 1 || cs[0].RestartCount < 1 || !podReady(p) || cs[0].LastTerminationState.Terminated == nil {
				return fmt.Errorf("container statuses %+v", cs)
			}
			return nil
		})
		b, err := f.Admin.CoreV1().Pods(ns).GetLogs("web-1", &corev1.PodLogOptions{Previous: true}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(b), "hello-from-web-1") {
			t.Fatalf("previous log: %q %v, want the first run's line", b, err)
		}
		evs, err := events(ctx, f.Admin, ns, "web-1")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range evs {
			found = found || e.Reason == "Killing" && strings.Contains(e.Message, "liveness")
		}
		if !found {
			t.Errorf("no Killing event for the failed liveness probe in %v", evs)
		}
	})

	t.Run("RestartsACrashingContainerWithBackoff", func(t *testing.T) {
		p := f.webPod(ns, "crash-1", pull)
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "CRASH", Value: "1"})
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 60*time.Second, "the container crashed twice and waits in CrashLoopBackOff", func(ctx context.Context) error {
			p, err := f.getPod(ctx, ns, "crash-1")
			if err != nil {
				return err
			}
			cs := p.Status.ContainerStatuses
			if len(cs) != 1 || cs[0].RestartCount < 2 || cs[0].LastTerminationState.Terminated == nil ||
				cs[0].LastTerminationState.Terminated.ExitCode != 3 {
				return fmt.Errorf("container statuses %+v", cs)
			}
			if podReady(p) {
				return fmt.Errorf("a crashing pod is Ready")
			}
			return nil
		})
	})

	t.Run("ReadyAsSoonAsItsStartupProbePasses", func(t *testing.T) {
		// An app that listens 2 s after its start, whose readiness probe
		// comes every 5 minutes: its startup probe, every second, finds
		// it listening, and the readiness probe then runs at once, as the
		// kubelet runs it. Without the startup probe the first readiness
		// probe fails and the next is 5 minutes away.
		p := f.webPod(ns, "slow-1", pull)
		ctr := &p.Spec.Containers[0]
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "LISTEN_DELAY", Value: "2s"})
		ctr.ReadinessProbe.PeriodSeconds = 300
		ctr.LivenessProbe = nil
		ctr.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
			PeriodSeconds: 1, FailureThreshold: 30}
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 60*time.Second, "the pod started and ready", func(ctx context.Context) error {
			p, err := f.getPod(ctx, ns, "slow-1")
			if err != nil {
				return err
			}
			cs := p.Status.ContainerStatuses
			if len(cs) != 1 || !ptr.Deref(cs[0].Started, false) || !cs[0].Ready || !podReady(p) || cs[0].RestartCount != 0 {
				return fmt.Errorf("phase %s %s, container statuses %+v", p.Status.Phase, p.Status.Message, cs)
			}
			return nil
		})
		if err := f.Admin.CoreV1().Pods(ns).Delete(ctx, "slow-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("RestartsAContainerThatFailsItsStartupProbe", func(t *testing.T) {
		p := f.webPod(ns, "nostart-1", pull)
		ctr := &p.Spec.Containers[0]
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "FAIL_HEALTH", Value: "1"})
		ctr.LivenessProbe = nil
		ctr.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
			PeriodSeconds: 1, FailureThreshold: 2}
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 60*time.Second, "the container restarted, never started nor ready", func(ctx context.Context) error {
			p, err := f.getPod(ctx, ns, "nostart-1")
			if err != nil {
				return err
			}
			cs := p.Status.ContainerStatuses
			if len(cs) != 1 || cs[0].RestartCount < 1 || cs[0].LastTerminationState.Terminated == nil {
				return fmt.Errorf("container statuses %+v", cs)
			}
			if ptr.Deref(cs[0].Started, false) || podReady(p) {
				return fmt.Errorf("a container that fails its startup probe is started or ready: %+v", cs)
			}
			return nil
		})
		evs, err := events(ctx, f.Admin, ns, "nostart-1")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range evs {
			found = found || e.Reason == "Killing" && strings.Contains(e.Message, "startup probe")
		}
		if !found {
			t.Errorf("no Killing event for the failed startup probe in %v", evs)
		}
		if err := f.Admin.CoreV1().Pods(ns).Delete(ctx, "nostart-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("FailsAPodPastItsActiveDeadline", func(t *testing.T) {
		p := f.webPod(ns, "deadline-1", pull)
		p.Spec.ActiveDeadlineSeconds = ptr.To(int64(2))
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.waitDeadlineExceeded(t, ns, "deadline-1")
	})

	// The way to stop a Pod and keep it (its status, its log): lower its
	// activeDeadlineSeconds, which the API allows on a running Pod.
	t.Run("FailsAPodWhoseActiveDeadlineIsLowered", func(t *testing.T) {
		p := f.webPod(ns, "lowered-1", pull)
		p.Spec.ActiveDeadlineSeconds = ptr.To(int64(3600))
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 60*time.Second, "the pod is ready", func(ctx context.Context) error {
			p, err := f.getPod(ctx, ns, "lowered-1")
			if err != nil {
				return err
			}
			if !podReady(p) {
				return fmt.Errorf("phase %s, containers %+v", p.Status.Phase, p.Status.ContainerStatuses)
			}
			return nil
		})
		if _, err := f.Admin.CoreV1().Pods(ns).Patch(ctx, "lowered-1", types.MergePatchType, []byte(`{"spec":{"activeDeadlineSeconds":1}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		f.waitDeadlineExceeded(t, ns, "lowered-1")
		// The Pod stays, and so does its log, to the app's last line.
		b, err := f.Admin.CoreV1().Pods(ns).GetLogs("lowered-1", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(b), "shutting down") {
			t.Errorf("the stopped pod's log: %q, %v; want the app's SIGTERM line", b, err)
		}
		if err := f.Admin.CoreV1().Pods(ns).Delete(ctx, "lowered-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("RunsADeploymentTheSchedulerBinds", func(t *testing.T) {
		labels := map[string]string{"app": "web"}
		tmpl := f.webPod(ns, "", pull)
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(2)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec},
			},
		}
		d.Spec.Template.Spec.NodeName = "" // kube-scheduler binds them
		if _, err := f.Admin.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 90*time.Second, "the Deployment's two Pods run on the node and serve", func(ctx context.Context) error {
			d, err := f.Admin.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Status.AvailableReplicas != 2 {
				return fmt.Errorf("%d of 2 replicas available", d.Status.AvailableReplicas)
			}
			pods, err := f.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName != nodeName {
					return fmt.Errorf("pod %s is on node %q", p.Name, p.Spec.NodeName)
				}
				if code, _, err := nodetest.Get(ctx, "http://"+p.Status.PodIP+":8080/"); err != nil || code != 200 {
					return fmt.Errorf("pod %s at %s: %d %v", p.Name, p.Status.PodIP, code, err)
				}
			}
			return nil
		})
		// Scaled to zero, the ReplicaSet deletes the Pods and the node
		// stops them.
		if _, err := f.Admin.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 60*time.Second, "the Pods are gone", func(ctx context.Context) error {
			pods, err := f.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return err
			}
			if len(pods.Items) > 0 {
				return fmt.Errorf("%d pods left", len(pods.Items))
			}
			return nil
		})
	})

	t.Run("StopsADeletedPodWithinItsGracePeriod", func(t *testing.T) {
		p, err := f.getPod(ctx, ns, "web-1")
		if err != nil {
			t.Fatal(err)
		}
		ip := p.Status.PodIP
		if err := f.Admin.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 30*time.Second, "the pod is gone and its address answers no more", func(ctx context.Context) error {
			if _, err := f.getPod(ctx, ns, "web-1"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("pod still there: %v", err)
			}
			if _, _, err := nodetest.Get(ctx, "http://"+ip+":8080/"); err == nil {
				return fmt.Errorf("%s still answers", ip)
			}
			return nil
		})
	})

	// A web Pod that a scale-down deletes: the EndpointSlice controller
	// marks its endpoint terminating and not ready at once, while its
	// container keeps serving through its preStop sleep; then it gets
	// SIGTERM (the test app says "shutting down") and the Pod goes.
	t.Run("KeepsServingADeletedPodThroughItsPreStopSleep", func(t *testing.T) {
		const sleep = 6
		labels := map[string]string{"app": "drain"}
		if _, err := f.Admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "drain"},
			Spec: corev1.ServiceSpec{Selector: labels,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := f.webPod(ns, "drain-1", pull)
		p.Labels = labels
		p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(sleep + 10))
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: sleep}}}
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var ip string
		platformtest.Eventually(t, 90*time.Second, "the pod is a ready endpoint of its Service", func(ctx context.Context) error {
			p, err := f.getPod(ctx, ns, "drain-1")
			if err != nil {
				return err
			}
			if !podReady(p) || p.Status.PodIP == "" {
				return fmt.Errorf("phase %s, ip %q, containers %+v", p.Status.Phase, p.Status.PodIP, p.Status.ContainerStatuses)
			}
			ip = p.Status.PodIP
			ep, err := f.endpoint(ctx, ns, "drain", ip)
			if err != nil {
				return err
			}
			if !ptr.Deref(ep.Conditions.Ready, false) {
				return fmt.Errorf("endpoint conditions %+v", ep.Conditions)
			}
			return nil
		})
		// The container's log, followed from before the deletion to the
		// container's end.
		logCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		rc, err := f.Admin.CoreV1().Pods(ns).GetLogs("drain-1", &corev1.PodLogOptions{Follow: true, Timestamps: true}).Stream(logCtx)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var log platformtest.SyncBuffer
		go func() { _, _ = io.Copy(&log, rc) }()
		platformtest.Eventually(t, 20*time.Second, "the followed log has the app's first line", func(context.Context) error {
			if !strings.Contains(log.String(), "listening on port") {
				return fmt.Errorf("log %q", log.String())
			}
			return nil
		})

		deleted := time.Now()
		if err := f.Admin.CoreV1().Pods(ns).Delete(ctx, "drain-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 30*time.Second, "the endpoint is terminating and no longer ready", func(ctx context.Context) error {
			ep, err := f.endpoint(ctx, ns, "drain", ip)
			if err != nil {
				return err
			}
			if ptr.Deref(ep.Conditions.Ready, true) || !ptr.Deref(ep.Conditions.Terminating, false) {
				return fmt.Errorf("endpoint conditions %+v", ep.Conditions)
			}
			return nil
		})
		t.Logf("endpoint marked terminating %s after the deletion", time.Since(deleted).Round(time.Millisecond))
		// Whoever read the endpoint before it changed may still send a
		// request: for the first half of the sleep (the app ends as soon
		// as it gets SIGTERM, so without the sleep it is gone by then),
		// the container answers every one and has had no SIGTERM.
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for half := deleted.Add(sleep * time.Second / 2); time.Now().Before(half); <-tick.C {
			code, body, err := nodetest.Get(ctx, "http://"+ip+":8080/")
			if err != nil || code != 200 || strings.TrimSpace(body) != "from-secret" {
				t.Fatalf("GET / of a deleted pod %s into its preStop sleep: %d %q %v, want 200 from-secret",
					time.Since(deleted).Round(time.Millisecond), code, body, err)
			}
		}
		if strings.Contains(log.String(), "shutting down") {
			t.Fatalf("the container got SIGTERM in its preStop sleep:\n%s", log.String())
		}
		platformtest.Eventually(t, 60*time.Second, "the container got SIGTERM and the pod is gone", func(ctx context.Context) error {
			if !strings.Contains(log.String(), "shutting down") {
				return fmt.Errorf("no SIGTERM in the log %q", log.String())
			}
			if _, err := f.getPod(ctx, ns, "drain-1"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("pod still there: %v", err)
			}
			return nil
		})
		for _, line := range strings.Split(log.String(), "\n") {
			ts, text, _ := strings.Cut(line, " ")
			if at, err := time.Parse(time.RFC3339Nano, ts); err == nil && strings.HasPrefix(text, "shutting down") {
				t.Logf("SIGTERM %s after the deletion (preStop sleep %ds)", at.Sub(deleted).Round(time.Millisecond), sleep)
			}
		}
	})

	// A static site's image, as the builder makes it without a run image
	// (make run's): one layer with the site under /app, web = bex-static,
	// which the run base finds in the platform's binary directory.
	t.Run("RunsAStaticSite", func(t *testing.T) {
		image := f.staticSite(t, "tenant-a", "site", "<h1>static on the node</h1>\n")
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-1"},
			Spec: corev1.PodSpec{
				NodeName:                     nodeName,
				AutomountServiceAccountToken: ptr.To(false),
				ImagePullSecrets:             []corev1.LocalObjectReference{{Name: pull}},
				Containers: []corev1.Container{{
					Name: "web", Image: image,
					Command: []string{"/bin/sh", "-c", "bex-static"}, // as the kube driver runs a process
					Env:     []corev1.EnvVar{{Name: "PORT", Value: "8080"}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
						PeriodSeconds: 1},
				}},
			},
		}
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 60*time.Second, "the site is served on its Pod IP", func(ctx context.Context) error {
			p, err := f.getPod(ctx, ns, "site-1")
			if err != nil {
				return err
			}
			if !podReady(p) || p.Status.PodIP == "" {
				return fmt.Errorf("phase %s, ip %q, containers %+v", p.Status.Phase, p.Status.PodIP, p.Status.ContainerStatuses)
			}
			code, body, err := nodetest.Get(ctx, "http://"+p.Status.PodIP+":8080/")
			if err != nil || code != 200 || body != "<h1>static on the node</h1>\n" {
				return fmt.Errorf("GET /: %d %q %v", code, body, err)
			}
			return nil
		})
		if err := f.Admin.CoreV1().Pods(ns).Delete(ctx, "site-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("KeepsAnEmptyDirForThePod", func(t *testing.T) {
		// The first run writes to the volume, finds it bounded and
		// crashes; the second finds what the first wrote.
		const script = `if [ -f /data/seen ]; then echo "again: $(cat /data/seen)"; exec sleep 3600; fi
echo first > /data/seen
head -c 2097152 /dev/zero > /data/big 2>/dev/null || echo "full at $(($(wc -c < /data/big) / 1024)) KiB"
exit 1`
		p := f.webPod(ns, "scratch-1", pull)
		// On the run base, which has a shell.
		p.Spec.Containers[0].Image = f.AppImage
		p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", script}
		p.Spec.Containers[0].ReadinessProbe, p.Spec.Containers[0].LivenessProbe = nil, nil
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Mi"))}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/data"}}
		created, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		volume := filepath.Join(f.StateDir, "volumes", string(created.UID), "scratch")
		platformtest.Eventually(t, 60*time.Second, "the restarted container finds what the first wrote", func(ctx context.Context) error {
			b, err := f.Admin.CoreV1().Pods(ns).GetLogs("scratch-1", &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				return err
			}
			if !strings.Contains(string(b), "again: first") {
				return fmt.Errorf("log %q", b)
			}
			return nil
		})
		b, err := f.Admin.CoreV1().Pods(ns).GetLogs("scratch-1", &corev1.PodLogOptions{Previous: true}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(b), "full at ") {
			t.Errorf("the first run's log: %q, %v; want the write past the volume's 1 MiB refused", b, err)
		}
		if _, err := os.Stat(volume); err != nil {
			t.Errorf("the volume on the node: %v", err)
		}
		if err := f.Admin.CoreV1().Pods(ns).Delete(ctx, "scratch-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 30*time.Second, "the volume goes with the pod", func(context.Context) error {
			if _, err := os.Stat(volume); !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%s: %v", volume, err)
			}
			return nil
		})
	})

	t.Run("RefusesWhatItDoesNotRun", func(t *testing.T) {
		p := f.webPod(ns, "hostpath-1", pull)
		p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 30*time.Second, "the pod failed as Unsupported with a Warning event", func(ctx context.Context) error {
			p, err := f.getPod(ctx, ns, "hostpath-1")
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Unsupported" || !strings.Contains(p.Status.Message, `volume "root"`) {
				return fmt.Errorf("status %s %s %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
			}
			evs, err := events(ctx, f.Admin, ns, "hostpath-1")
			if err != nil {
				return err
			}
			for _, e := range evs {
				if e.Type == corev1.EventTypeWarning && e.Reason == "Unsupported" {
					return nil
				}
			}
			return fmt.Errorf("no Unsupported event in %v", evs)
		})
		if _, err := os.Stat(filepath.Join(f.StateDir, "pods")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("WantsRegistryCredentials", func(t *testing.T) {
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, f.webPod(ns, "nocreds-1", ""), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 30*time.Second, "the container waits in ErrImagePull saying why", func(ctx context.Context) error {
			p, err := f.getPod(ctx, ns, "nocreds-1")
			if err != nil {
				return err
			}
			cs := p.Status.ContainerStatuses
			if len(cs) != 1 || cs[0].State.Waiting == nil || cs[0].State.Waiting.Reason != "ErrImagePull" ||
				!strings.Contains(cs[0].State.Waiting.Message, "401") {
				return fmt.Errorf("container statuses %+v", cs)
			}
			return nil
		})
	})

	// The agent's API is for the apiserver: a client without a
	// certificate of the CA is turned away at the handshake, and one with
	// a certificate but no grant for nodes/proxy gets 403.
	t.Run("LogsOnlyForAuthorizedClients", func(t *testing.T) {
		platformtest.Eventually(t, 30*time.Second, "the agent's API listens", func(ctx context.Context) error {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", f.Port))
			if err != nil {
				return err
			}
			return c.Close()
		})
		url := fmt.Sprintf("https://127.0.0.1:%d/containerLogs/%s/crash-1/web", f.Port, ns)
		noCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.CA.Pool()}}}
		if resp, err := noCert.Get(url); err == nil {
			resp.Body.Close()
			t.Fatalf("a client without a certificate got %s", resp.Status)
		}
		tenant, err := f.CA.Issue(pki.Spec{CommonName: "tenant-a-user", NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: f.CA.Pool(), Certificates: []tls.Certificate{tenant.TLSCertificate()}}}}
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || strings.Contains(string(b), "crashing on purpose") {
			t.Fatalf("a user without nodes/proxy got %s: %q", resp.Status, b)
		}
	})
}

// TestAgentRefusesPodsPastItsCapacity: a Pod bound by name past the node's
// pods (no scheduler checks it) fails as OutOfpods, as the kubelet's
// admission does, and the node's other Pod keeps running.
func TestAgentRefusesPodsPastItsCapacity(t *testing.T) {
	f := start(t, func(_ *fixture, o *node.Options) {
		o.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	})
	ctx := context.Background()
	const ns = "tenant-a"
	f.Namespace(t, ns)
	pull := f.PullSecret(t, ns)
	if _, err := f.Admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "env"}, StringData: map[string]string{"VERSION": "one"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"first", "second"} {
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, f.webPod(ns, name, pull), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 60*time.Second, "the agent took "+name, func(ctx context.Context) error {
			p, err := f.getPod(ctx, ns, name)
			if err != nil {
				return err
			}
			if p.Status.Phase == corev1.PodPending && len(p.Status.ContainerStatuses) == 0 {
				return fmt.Errorf("not seen yet")
			}
			return nil
		})
	}
	platformtest.Eventually(t, 60*time.Second, "first runs, second failed as OutOfpods", func(ctx context.Context) error {
		first, err := f.getPod(ctx, ns, "first")
		if err != nil {
			return err
		}
		second, err := f.getPod(ctx, ns, "second")
		if err != nil {
			return err
		}
		if !podReady(first) {
			return fmt.Errorf("first is not ready: %s %v", first.Status.Phase, first.Status.ContainerStatuses)
		}
		if second.Status.Phase != corev1.PodFailed || second.Status.Reason != "OutOfpods" || !strings.Contains(second.Status.Message, "capacity: 1") {
			return fmt.Errorf("second: %s %s %q", second.Status.Phase, second.Status.Reason, second.Status.Message)
		}
		return nil
	})
}
