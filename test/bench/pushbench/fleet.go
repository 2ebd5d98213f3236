package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/controllers/scheme"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/web/api/apiclient"
)

// fleetCluster is the local cluster --fleet makes: three control-plane
// machines, as bex fleet create makes by default, and one worker.
const fleetCluster = "bench"

// buildNode builds bex-node and bex-static, which the platform's worker
// machines run (make build puts them beside bex-embedded; this process
// is not bex-embedded), into dir and returns bex-node's path.
func buildNode(ctx context.Context, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "building bex-node and bex-static into %s\n", dir)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "bex.co/bex/cmd/bex-node", "bex.co/bex/cmd/bex-static")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building bex-node: %w\n%s", err, out)
	}
	// The worker's containers see the directory read-only.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(dir, "bex-node"), nil
}

// createCluster waits for the local fleet, creates fleetCluster at the
// newest pinned version through the API as bex fleet create does, and
// returns its name once its machines are healthy, its worker ready and
// the scheduler has put the local runtime on standby for it (new apps go
// onto the cluster).
func (o *options) createCluster(ctx context.Context, env map[string]string) (string, error) {
	if err := waitLog(ctx, filepath.Join(o.stateDir, "platform.log"), "local fleet ready"); err != nil {
		return "", err
	}
	op, err := apiclient.New(env["BEX_API"], env["BEX_OPERATOR_TOKEN"], nil)
	if err != nil {
		return "", err
	}
	versions := kubebin.KubeVersions()
	version := "v" + versions[len(versions)-1]
	began := time.Now()
	lc, err := op.CreateLocalCluster(ctx, apiclient.CreateLocalClusterRequest{Name: fleetCluster, Version: version, ControlPlaneReplicas: 3, WorkerReplicas: 1})
	if err != nil {
		return "", fmt.Errorf("creating the local cluster %s: %w", fleetCluster, err)
	}
	fmt.Fprintf(os.Stderr, "creating the local cluster %s (%s, three control-plane machines and a worker)\n", lc.Name, version)
	err = poll(ctx, 10*time.Minute, 10*time.Second, func(ctx context.Context) (string, error) {
		fleet, err := op.ListFleet(ctx)
		if err != nil {
			return "", err
		}
		for _, c := range fleet {
			if c.Name != lc.Name {
				continue
			}
			cp, workers := healthy(c.Machines), healthy(c.Workers)
			if cp == 3 && workers == 1 {
				return "", nil
			}
			return fmt.Sprintf("%s: %d of 3 control-plane machines and %d of 1 worker healthy", lc.Name, cp, workers), nil
		}
		return lc.Name + " not listed yet", nil
	})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "%s ready %s after its creation\n", lc.Name, time.Since(began).Round(time.Second))
	if err := waitStandby(ctx, env["BEX_KUBECONFIG"], fleetCluster); err != nil {
		return "", err
	}
	return fleetCluster, nil
}

func healthy(ms []apiclient.FleetMachine) int {
	n := 0
	for _, m := range ms {
		if m.Healthy && !m.Deleting {
			n++
		}
	}
	return n
}

// waitStandby waits until the scheduler's ClusterCapacity of the local
// runtime says it stands by for cluster.
func waitStandby(ctx context.Context, kubeconfig, cluster string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	return poll(ctx, 2*time.Minute, 10*time.Second, func(ctx context.Context) (string, error) {
		cc := &schedulingv1alpha1.ClusterCapacity{}
		if err := c.Get(ctx, client.ObjectKey{Name: "local"}, cc); err != nil {
			return "", err
		}
		if cc.Status.Reason == schedulingv1alpha1.ReasonStandby && strings.Contains(cc.Status.Message, cluster) {
			return "", nil
		}
		return fmt.Sprintf("the local runtime not on standby yet: %s: %s", cc.Status.Reason, cc.Status.Message), nil
	})
}

// waitPlaced waits until the tenant's app name is placed on cluster.
func waitPlaced(ctx context.Context, env map[string]string, name, cluster string) error {
	tenant, err := apiclient.New(env["BEX_API"], env["BEX_TOKEN"], nil)
	if err != nil {
		return err
	}
	return poll(ctx, 2*time.Minute, 10*time.Second, func(ctx context.Context) (string, error) {
		app, err := tenant.GetApp(ctx, name)
		if err != nil {
			return "", err
		}
		switch {
		case app.Placed == "placed" && app.Cluster == cluster:
			return "", nil
		case app.Placed == "placed":
			return "", fmt.Errorf("app %s was placed on %q, not on %s: %s", name, app.Cluster, cluster, app.Placement)
		}
		return fmt.Sprintf("app %s %s: %s", name, app.Placed, app.Placement), nil
	})
}

// poll calls check every 200 ms until it returns no status and no error,
// or fails with check's error or once timeout passes. The status, what is
// awaited, goes to stderr at most every progress.
func poll(ctx context.Context, timeout, progress time.Duration, check func(context.Context) (string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var said time.Time
	status := ""
	for {
		s, err := check(ctx)
		var netErr net.Error
		switch {
		case err != nil && (errors.As(err, &netErr) || ctx.Err() != nil):
			s = err.Error()
		case err != nil:
			return err
		case s == "":
			return nil
		}
		status = s
		if time.Since(said) >= progress {
			fmt.Fprintln(os.Stderr, "waiting: "+s)
			said = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up after %s: %s", timeout, status)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
