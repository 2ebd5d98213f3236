package apitest

import (
	"context"
	"net"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/runtimetest"
)

// RunTestApp runs release number of tenant's app in e.Runtime, as a
// push's rollout would: the runtime suite's test app (runtimetest), one
// web instance with its health check and one instance of each other
// process given. It returns once they all run.
func (e *Env) RunTestApp(t testing.TB, tenant, app string, number int, others ...string) {
	t.Helper()
	dir := t.TempDir()
	runtimetest.BuildTestApp(t, dir)
	procs := map[string]runtime.Process{runtime.WebProcess: {Replicas: 1}}
	for _, p := range others {
		procs[p] = runtime.Process{Replicas: 1}
	}
	rel := runtimetest.InDir(runtime.Release{
		Tenant: tenant, App: app, Number: number, Processes: procs,
		Env:         map[string]string{runtimetest.EnvVersion: "v1"},
		HealthCheck: runtime.HealthCheck{Path: runtimetest.HealthPath, Interval: 100 * time.Millisecond, Timeout: 2 * time.Second},
	}, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.Runtime.Deploy(ctx, rel, nil); err != nil {
		t.Fatalf("running %s/%s v%d: %v", tenant, app, number, err)
	}
}

// CrashTestApp makes the web instance of tenant's app, which RunTestApp
// runs, exit on its own; the runtime restarts it.
func (e *Env) CrashTestApp(t testing.TB, tenant, app string) {
	t.Helper()
	_, _ = runtimetest.EdgeGet(e.Runtime, AppDomain, tenant, app, "/exit") // the connection drops as it exits
}

// SetCurrentRelease writes the App's status.currentRelease as a rollout
// does.
func (e *Env) SetCurrentRelease(t testing.TB, tenant, app string, number int64) {
	t.Helper()
	obj := &platformv1alpha1.App{}
	if err := e.Kube.Get(context.Background(), client.ObjectKey{Namespace: tenant, Name: app}, obj); err != nil {
		t.Fatal(err)
	}
	obj.Status.CurrentRelease = number
	if err := e.Kube.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// UnreachableRuntime is the kube runtime driver of a workload cluster that
// does not answer: nothing listens at its apiserver's address any more
// (the port was taken, then let go), so every call is refused, as a
// cluster gone down is. An API given it as its InstanceSource cannot read
// instances.
func UnreachableRuntime(t testing.TB) runtime.Driver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := kube.New(&rest.Config{Host: "http://" + addr, Timeout: 10 * time.Second}, kube.Options{})
	if err != nil {
		t.Fatalf("creating the kube driver of a cluster that does not answer: %v", err)
	}
	return d
}
