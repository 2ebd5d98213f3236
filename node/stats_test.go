package node_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/appmetrics"
	"bex.co/bex/internal/pki"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/node"
	"bex.co/bex/test/platformtest"
)

// fillMiB is what the burning Pod writes to its memory-backed emptyDir:
// pages charged to its container's cgroup, in its working set.
const fillMiB = 32

// TestStatsSummary runs a Pod that fills 32 MiB of a memory-backed
// emptyDir and then burns CPU, and reads the node's stats summary as the
// apiserver's kubelet client: the Pod and its container are there with a
// working set above what it wrote and a CPU time that grows; a deleted Pod
// leaves the summary; the agent turns away a client the apiserver does
// not allow nodes/stats.
func TestStatsSummary(t *testing.T) {
	f := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "tenant-a"
	f.Namespace(t, ns)
	pull := f.PullSecret(t, ns)

	p := f.webPod(ns, "burn-1", pull)
	c := &p.Spec.Containers[0]
	c.Image = f.AppImage // the run base, which has a shell
	c.EnvFrom, c.ReadinessProbe, c.LivenessProbe = nil, nil, nil
	c.Command = []string{"/bin/sh", "-c", fmt.Sprintf("head -c %d /dev/zero > /data/fill && echo filled && while :; do :; done", fillMiB<<20)}
	c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1")
	p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("64Mi"))}}}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/data"}}
	created, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 90*time.Second, "the pod filled its volume", func(ctx context.Context) error {
		b, err := f.Admin.CoreV1().Pods(ns).GetLogs("burn-1", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "filled") {
			return fmt.Errorf("log %q", b)
		}
		return nil
	})

	// What the apiserver's node proxy sends: the apiserver proxies to
	// no loopback address, so the test asks the agent itself, as the
	// apiserver's kubelet client (system:kubelet-api-admin).
	kc, err := f.CA.Issue(pki.Spec{CommonName: kubeletClient, NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	apiserver := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: f.CA.Pool(), Certificates: []tls.Certificate{kc.TLSCertificate()}}}}
	summary := func(ctx context.Context) (*statsv1alpha1.Summary, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/stats/summary", f.Port), nil)
		if err != nil {
			return nil, nil, err
		}
		resp, err := apiserver.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return nil, b, fmt.Errorf("%s, %v", resp.Status, err)
		}
		var s statsv1alpha1.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, b, fmt.Errorf("decoding the summary: %w", err)
		}
		return &s, b, nil
	}
	podOf := func(s *statsv1alpha1.Summary) *statsv1alpha1.PodStats {
		for i := range s.Pods {
			if r := s.Pods[i].PodRef; r.Namespace == ns && r.Name == "burn-1" {
				return &s.Pods[i]
			}
		}
		return nil
	}

	s, raw, err := summary(ctx)
	if err != nil {
		t.Fatalf("the summary: %v (%s)", err, raw)
	}
	for _, field := range []string{`"usageCoreNanoSeconds"`, `"workingSetBytes"`, `"usageBytes"`, `"startTime"`} {
		if !strings.Contains(string(raw), field) {
			t.Errorf("the summary has no %s: %s", field, raw)
		}
	}
	if s.Node.NodeName != nodeName {
		t.Errorf("the summary's node is %q, want %q", s.Node.NodeName, nodeName)
	}
	ps := podOf(s)
	if ps == nil {
		t.Fatalf("the summary has no pod %s/burn-1: %s", ns, raw)
	}
	if ps.PodRef.UID != string(created.UID) || ps.StartTime.IsZero() || len(ps.Containers) != 1 || ps.Containers[0].Name != "web" {
		t.Fatalf("the pod's stats: %s", raw)
	}
	first := ps.Containers[0]
	if first.StartTime.IsZero() || first.CPU == nil || first.CPU.Time.IsZero() || first.CPU.UsageCoreNanoSeconds == nil ||
		first.Memory == nil || first.Memory.WorkingSetBytes == nil || first.Memory.UsageBytes == nil {
		t.Fatalf("the container's stats lack fields: %s", raw)
	}
	if ws, usage := *first.Memory.WorkingSetBytes, *first.Memory.UsageBytes; ws < fillMiB<<20 || usage < ws || usage > 128<<20 {
		t.Errorf("the container's memory: working set %d, usage %d; want at least the %d MiB it wrote, under its 128 MiB limit", ws, usage, fillMiB)
	}
	if *first.CPU.UsageCoreNanoSeconds == 0 {
		t.Errorf("the container used no CPU time: %s", raw)
	}
	if ps.CPU == nil || ps.CPU.UsageCoreNanoSeconds == nil || ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
		t.Errorf("the pod's own figures are missing: %s", raw)
	}
	// A second of burning adds to its CPU time.
	platformtest.Eventually(t, 60*time.Second, "the container's CPU time grows", func(ctx context.Context) error {
		s, raw, err := summary(ctx)
		if err != nil {
			return fmt.Errorf("%w (%s)", err, raw)
		}
		ps := podOf(s)
		if ps == nil || len(ps.Containers) != 1 || ps.Containers[0].CPU == nil || ps.Containers[0].CPU.UsageCoreNanoSeconds == nil {
			return fmt.Errorf("no container stats: %s", raw)
		}
		if now, before := *ps.Containers[0].CPU.UsageCoreNanoSeconds, *first.CPU.UsageCoreNanoSeconds; now < before+uint64(time.Second) {
			return fmt.Errorf("CPU time %d ns, was %d", now, before)
		}
		return nil
	})

	t.Run("OnlyForAuthorizedClients", func(t *testing.T) {
		user, err := f.CA.Issue(pki.Spec{CommonName: "tenant-a-user", NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: f.CA.Pool(), Certificates: []tls.Certificate{user.TLSCertificate()}}}}
		resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/stats/summary", f.Port))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "subresource=stats") || strings.Contains(string(b), "burn-1") {
			t.Fatalf("a user without nodes/stats got %s: %q", resp.Status, b)
		}
	})

	t.Run("ADeletedPodLeaves", func(t *testing.T) {
		if err := f.Admin.CoreV1().Pods(ns).Delete(ctx, "burn-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 30*time.Second, "the deleted pod left the summary", func(ctx context.Context) error {
			s, raw, err := summary(ctx)
			if err != nil {
				return err
			}
			if podOf(s) != nil {
				return fmt.Errorf("still there: %s", raw)
			}
			return nil
		})
	})
}

// TestKubeUsage runs an app that burns CPU in one tenant and an idle app
// of the same name in another on the node, and reads their usage with the
// kube driver (each node's summary through the apiserver): each tenant's
// Usage has its own Pods only, as the instances Status names them, the
// burning one with CPU time and both with memory; an app of a tenant that
// has none is ErrNotFound. A sampler over the driver gives each app its
// own CPU, memory and instance.
func TestKubeUsage(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	// The apiserver proxies to no loopback address: the driver reads the
	// node at 127.0.0.1 directly, with the cluster's admin certificate, as
	// on a local fleet, where one CA signs every certificate.
	f := start(t, func(f *fixture, o *node.Options) {
		o.Keychain = build.Keychain(f.Registry, registry.Auth(registryToken))
		clusterCA, err := os.ReadFile(f.CP.CAFile())
		if err != nil {
			t.Fatal(err)
		}
		o.ClientCAs.AppendCertsFromPEM(clusterCA)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg := f.CP.RESTConfig()
	clusterCA, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	// It trusts the node's serving certificate, of the fixture's CA.
	cfg.CAFile, cfg.CAData = "", append(clusterCA, f.CA.CertPEM()...)
	d, err := kube.New(cfg, kube.Options{PollInterval: 200 * time.Millisecond, ProgressDeadline: 2 * time.Minute, GracePeriod: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const app = "burner"
	commands := map[string]string{"alpha": "while :; do :; done", "beta": "exec sleep 3600"}
	for _, tenant := range []string{"alpha", "beta"} {
		rel := runtime.Release{Tenant: tenant, App: app, Number: 1, Image: f.AppImage,
			Processes: map[string]runtime.Process{"worker": {Command: commands[tenant], Replicas: 1}}}
		if err := d.Deploy(ctx, rel, nil); err != nil {
			t.Fatalf("deploying %s/%s: %v", tenant, app, err)
		}
		t.Cleanup(func() { _ = d.Remove(context.Background(), tenant, app) })
	}

	// podNames are the names of the app's Pods in the tenant's namespace.
	podNames := func(ctx context.Context, tenant string) ([]string, error) {
		st, err := d.Status(ctx, tenant, app)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, i := range st.Instances {
			if i.Process != "worker" || i.Index != 0 {
				return nil, fmt.Errorf("instance %+v", i)
			}
			names = append(names, i.ID)
		}
		pods, err := f.Admin.CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var inNS []string
		for _, p := range pods.Items {
			inNS = append(inNS, p.Name)
		}
		if len(names) != 1 || !slices.Equal(names, inNS) {
			return nil, fmt.Errorf("instances %v, pods in namespace %s %v", names, tenant, inNS)
		}
		return names, nil
	}
	var alpha runtime.Usage
	platformtest.Eventually(t, 90*time.Second, "each tenant's usage, of its own pod", func(ctx context.Context) error {
		for _, tenant := range []string{"alpha", "beta"} {
			names, err := podNames(ctx, tenant)
			if err != nil {
				return err
			}
			u, err := d.Usage(ctx, tenant, app)
			if err != nil {
				return fmt.Errorf("usage of %s/%s: %w", tenant, app, err)
			}
			if len(u) != 1 || u[0].ID != names[0] || u[0].Process != "worker" || u[0].Index != 0 || u[0].MemoryBytes <= 0 {
				return fmt.Errorf("usage of %s/%s: %+v; want its pod %s with memory", tenant, app, u, names[0])
			}
			if tenant == "alpha" {
				if u[0].CPUSeconds < 0.5 {
					return fmt.Errorf("usage of %s/%s: %+v; want half a second of CPU or more", tenant, app, u)
				}
				alpha = u[0]
			}
		}
		return nil
	})
	t.Logf("alpha's burner: %+v", alpha)
	if _, err := d.Usage(ctx, "gamma", app); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("the usage of an app gamma does not have: %v, want ErrNotFound", err)
	}

	// The apps' series as bex-web samples them over the driver: alpha's
	// burner uses about a core, beta's idle one next to nothing, each
	// with its memory and its one instance. This driver keeps no summary:
	// the polls below sample sooner than a sampler's interval.
	fresh, err := kube.New(cfg, kube.Options{SummaryMaxAge: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := appmetrics.New(appmetrics.Options{Runtime: fresh, Apps: func(context.Context) ([]appmetrics.Key, error) {
		return []appmetrics.Key{{Tenant: "alpha", App: app}, {Tenant: "beta", App: app}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 90*time.Second, "a point of alpha's burner with CPU", func(ctx context.Context) error {
		now := time.Now()
		if err := s.Sample(ctx, now); err != nil {
			return err
		}
		last := func(tenant string) appmetrics.Point {
			series, _ := s.Series(tenant, app, time.Hour, now)
			return series.Points[len(series.Points)-1]
		}
		a, b := last("alpha"), last("beta")
		if a.CPUCores == nil || *a.CPUCores < 0.3 || a.MemoryBytes == nil || *a.MemoryBytes <= 0 || a.Instances != 1 {
			return fmt.Errorf("alpha's point %+v: want 0.3 cores or more, memory, one instance", a)
		}
		if b.CPUCores == nil || *b.CPUCores >= *a.CPUCores || b.MemoryBytes == nil || *b.MemoryBytes <= 0 || b.Instances != 1 {
			return fmt.Errorf("beta's point %+v: want less CPU than alpha's %v, memory, one instance", b, *a.CPUCores)
		}
		t.Logf("alpha %.2f cores %d bytes; beta %.3f cores %d bytes", *a.CPUCores, *a.MemoryBytes, *b.CPUCores, *b.MemoryBytes)
		return nil
	})
}
