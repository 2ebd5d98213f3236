package node_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/node"
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
		o.Keychain = build.Keychain(f.registry, registry.Auth(registryToken))
	})
	newDriver := func(t *testing.T) runtime.Driver {
		d, err := kube.New(f.cp.RESTConfig(), kube.Options{PollInterval: 200 * time.Millisecond, ProgressDeadline: 15 * time.Second, GracePeriod: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	runtimetest.RunDriverSuite(t, newDriver, runtimetest.Harness{
		Complete: func(t *testing.T, rel runtime.Release) runtime.Release {
			rel.Image = f.appImage
			return runtimetest.WithWorkerCommands(rel)
		},
		Get: func(t *testing.T, _ runtime.Driver, tenant, app, path string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			slices, err := f.admin.DiscoveryV1().EndpointSlices(tenant).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + app})
			if err != nil {
				return "", err
			}
			for _, s := range slices.Items {
				for _, e := range s.Endpoints {
					if e.Conditions.Ready != nil && *e.Conditions.Ready && len(e.Addresses) > 0 {
						_, body, err := get(ctx, "http://"+net.JoinHostPort(e.Addresses[0], strconv.Itoa(kube.WebPort))+path)
						return body, err
					}
				}
			}
			return "", fmt.Errorf("no ready endpoint of %s/%s", tenant, app)
		},
		Logs:    true,
		Timeout: 3 * time.Minute,
		// A container's log merges its streams, and bex-node serves no
		// attach: a run's Pod reads no stdin.
		MergedOutput: true,
		NoInput:      true,
	})
}
