package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/runtimemetrics"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/node"
	"bex.co/bex/node/nodetest"
	"bex.co/bex/test/platformtest"
)

// TestKubeDriverSuiteOnTheNode runs the runtime drivers' suite with the
// kube driver against a cluster whose Pods bex-node runs: the controller
// manager makes the Deployments' Pods, the scheduler binds them, the node
// pulls the release's image with its own registry credentials (the
// driver's Pods name no pull secret) and runs it; the suite reads what the
// app serves from the Service's EndpointSlices and its logs through the
// apiserver.
func TestKubeDriverSuiteOnTheNode(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	f := start(t, func(f *fixture, o *node.Options) {
		o.Keychain = build.Keychain(f.Registry, registry.Auth(registryToken))
	})
	newDriver := func(t *testing.T) runtime.Driver {
		d, err := kube.New(f.CP.RESTConfig(), kube.Options{PollInterval: 200 * time.Millisecond, ProgressDeadline: 15 * time.Second, GracePeriod: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	runtimetest.RunDriverSuite(t, newDriver, runtimetest.Harness{
		Complete: func(t *testing.T, rel runtime.Release) runtime.Release {
			rel.Image = f.AppImage
			return runtimetest.WithWorkerCommands(rel)
		},
		Get: func(t *testing.T, _ runtime.Driver, tenant, app, path string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			slices, err := f.Admin.DiscoveryV1().EndpointSlices(tenant).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + app})
			if err != nil {
				return "", err
			}
			for _, s := range slices.Items {
				for _, e := range s.Endpoints {
					if e.Conditions.Ready != nil && *e.Conditions.Ready && len(e.Addresses) > 0 {
						_, body, err := nodetest.Get(ctx, "http://"+net.JoinHostPort(e.Addresses[0], strconv.Itoa(kube.WebPort))+path)
						return body, err
					}
				}
			}
			return "", fmt.Errorf("no ready endpoint of %s/%s", tenant, app)
		},
		// The kubelet's restarts of a container that exited (the Crash
		// case asks the app for /exit) are what the counter counts.
		Metrics: func(t *testing.T, d runtime.Driver) (prometheus.Collector, string) {
			c, err := runtimemetrics.New(runtimemetrics.Options{
				Driver: kube.DriverLabel, Sources: d.(*kube.Driver).MetricsSources,
			})
			if err != nil {
				t.Fatal(err)
			}
			return c, kube.DriverLabel
		},
		Logs:    true,
		Timeout: 3 * time.Minute,
		// A container's log has its streams apart (the cluster's
		// PodLogsQuerySplitStreams), as has a run's output read from it.
		Terminal: true,
	})
	t.Run("RunPods", func(t *testing.T) { testRunPods(t, f, newDriver(t).(*kube.Driver)) })
}

// testRunPods: a run of a release not deployed yet (the release phase)
// runs with that release's environment and leaves the deployed one as it
// is; a run's Pod is no instance of the app and not behind its Service;
// a detached run that is stopped keeps its lines and how it ended in the
// app's log, its Pod stopped by a lowered activeDeadlineSeconds and kept;
// an image that cannot be pulled fails the run saying so; no run leaves a
// Pod or a Secret behind.
func testRunPods(t *testing.T, f *fixture, d *kube.Driver) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const tenant, app = "suite", "migrate"
	release := func(n int) runtime.Release {
		return runtimetest.WithWorkerCommands(runtime.Release{
			Tenant: tenant, App: app, Number: n, Image: f.AppImage,
			Env:         map[string]string{runtimetest.EnvVersion: "v" + strconv.Itoa(n)},
			Processes:   map[string]runtime.Process{runtime.WebProcess: {Replicas: 1}},
			HealthCheck: runtime.HealthCheck{Path: runtimetest.HealthPath, Interval: 200 * time.Millisecond},
		})
	}
	if err := d.Deploy(ctx, release(1), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Remove(context.Background(), tenant, app) })
	command := func(out io.Writer, args ...string) runtime.Command {
		return runtime.Command{Args: args, Name: "release", Attach: func(int) (runtime.Streams, error) {
			return runtime.Streams{Stdout: out, Stderr: out}, nil
		}}
	}
	noneLeft := func(t *testing.T) {
		t.Helper()
		sel := metav1.ListOptions{LabelSelector: kube.LabelRunOf + "=" + app}
		pods, err := f.Admin.CoreV1().Pods(tenant).List(ctx, sel)
		if err != nil || len(pods.Items) != 0 {
			t.Errorf("run pods left: %v %v", pods, err)
		}
		secrets, err := f.Admin.CoreV1().Secrets(tenant).List(ctx, sel)
		if err != nil || len(secrets.Items) != 0 {
			t.Errorf("run secrets left: %v %v", secrets, err)
		}
	}

	t.Run("a release not deployed yet", func(t *testing.T) {
		var out platformtest.SyncBuffer
		exit, err := d.Run(ctx, release(2), command(&out, "sh", "-c", `echo "migrating to $`+runtimetest.EnvVersion+`"; exit 3`))
		if err != nil || exit.Code != 3 || exit.Reason != "" || out.String() != "migrating to v2\n" {
			t.Errorf("the release phase of v2: exit %+v, %v, output %q; want 3, migrating to v2", exit, err, out.String())
		}
		if st, err := d.Status(ctx, tenant, app); err != nil || st.Release != 1 || !st.Ready || len(st.Instances) != 1 {
			t.Errorf("after v2's release phase the app is %+v, %v; want v1 ready as it was", st, err)
		}
		if _, err := f.Admin.CoreV1().Secrets(tenant).Get(ctx, kube.EnvSecretName(app, 2), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("v2's env Secret after its release phase only: %v, want none", err)
		}
		noneLeft(t)
	})

	t.Run("a run is no instance", func(t *testing.T) {
		var out platformtest.SyncBuffer
		runCtx, stop := context.WithCancelCause(ctx)
		defer stop(nil)
		done := make(chan runtime.Exit, 1)
		go func() {
			exit, err := d.Run(runCtx, release(1), command(&out, "sh", "-c", "echo up; exec sleep 600"))
			if err != nil {
				t.Errorf("the run: %v", err)
			}
			done <- exit
		}()
		for !strings.Contains(out.String(), "up") {
			if ctx.Err() != nil {
				t.Fatalf("the run did not start: %q", out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if st, err := d.Status(ctx, tenant, app); err != nil || len(st.Instances) != 1 || st.Instances[0].Process != runtime.WebProcess {
			t.Errorf("while a run runs the app has %+v, %v; want its web instance only", st.Instances, err)
		}
		slices, err := f.Admin.DiscoveryV1().EndpointSlices(tenant).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + app})
		endpoints := 0
		for _, s := range slices.Items {
			endpoints += len(s.Endpoints)
		}
		if err != nil || endpoints != 1 {
			t.Errorf("while a run runs the app's Service has %d endpoints (%v), want its web instance's only", endpoints, err)
		}
		stop(errors.New("enough"))
		exit := <-done
		if exit.Code == 0 || exit.Reason != "enough" {
			t.Errorf("a stopped run: %+v, want a signal's status and the context's cause", exit)
		}
		noneLeft(t)
	})

	t.Run("a stopped detached run keeps its lines", func(t *testing.T) {
		runCtx, stop := context.WithCancelCause(ctx)
		defer stop(nil)
		const args = "echo up; exec sleep 600"
		cmd := runtime.Command{Args: []string{"sh", "-c", args}, Name: "run", Attach: func(int) (runtime.Streams, error) {
			return runtime.Streams{Log: &runtime.LogAs{Process: "run", Index: 9}}, nil
		}}
		done := make(chan runtime.Exit, 1)
		go func() {
			exit, err := d.Run(runCtx, release(1), cmd)
			if err != nil {
				t.Errorf("the run: %v", err)
			}
			done <- exit
		}()
		lines := func() []string {
			ch, err := d.Logs(ctx, tenant, app, -1, false)
			if err != nil {
				return []string{err.Error()}
			}
			var got []string
			for l := range ch {
				if l.Process == "run" && l.Instance == 9 {
					got = append(got, l.Stream+": "+l.Text)
				}
			}
			return got
		}
		platformtest.Eventually(t, time.Minute, "the run's first line in the app's log", func(context.Context) error {
			if got := lines(); !slices.Contains(got, runtime.Stdout+": up") {
				return fmt.Errorf("the lines of run.9: %q", got)
			}
			return nil
		})
		stop(errors.New("stopped by the user"))
		exit := <-done
		if exit.Code == 0 || exit.Reason != "stopped by the user" {
			t.Errorf("a stopped detached run: %+v, want a signal's status and the context's cause", exit)
		}
		want := []string{runtime.System + ": Running sh -c " + args, runtime.Stdout + ": up",
			runtime.System + ": Process exited with status " + strconv.Itoa(exit.Code)}
		platformtest.Eventually(t, 30*time.Second, "the stopped run's lines and its end in the app's log", func(context.Context) error {
			if got := lines(); !slices.Equal(got, want) {
				return fmt.Errorf("the lines of run.9: %q, want %q", got, want)
			}
			return nil
		})
		pods, err := f.Admin.CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelRunInstance + "=run.9"})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Reason != "DeadlineExceeded" {
			t.Fatalf("the stopped run's pod: %+v, %v; want it kept, failed with DeadlineExceeded", pods, err)
		}
		if err := f.Admin.CoreV1().Pods(tenant).Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("an image that cannot be pulled", func(t *testing.T) {
		rel := release(1)
		rel.Image = f.Registry + "/suite/nothing:1"
		var out platformtest.SyncBuffer
		_, err := d.Run(ctx, rel, command(&out, "true"))
		if err == nil || !strings.Contains(err.Error(), "ErrImagePull") {
			t.Errorf("a run of an image that is not there: %v, want ErrImagePull", err)
		}
		noneLeft(t)
	})
}
