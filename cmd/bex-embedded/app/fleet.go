package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"bex.co/bex/internal/capi"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/localfleet"
	"bex.co/bex/web/api"
)

// localFleet is make run's local Cluster API fleet: the local provider's
// reconcilers, on the in-process controller manager, over a Host whose
// clusters live under <state>/fleet; and Cluster API's managers
// (internal/capi, under <state>/capi), started in the background once the
// platform runs, since their first build takes many minutes. Until they
// run, the API refuses to create or delete clusters (Ready says why); the
// clusters of the last run come back meanwhile, as their objects are
// reconciled.
type localFleet struct {
	host *localfleet.Host
	dir  string // <state>/capi
	out  io.Writer

	mu       sync.Mutex
	notReady error
	managers *capi.Managers

	// afterStart, when set, runs once the managers run (the takeover of
	// the platform's plane); its error goes to out.
	afterStart func(context.Context) error

	cancel context.CancelFunc
	done   chan struct{}
}

var _ api.LocalFleet = (*localFleet)(nil)

// errFleetStarting is Ready's answer until the managers run.
var errFleetStarting = errors.New("Cluster API's managers are starting in the background (the first start builds them: " +
	"about 20 minutes on 2 cores, with progress in make run's output); try again once make run prints \"local fleet ready\"")

// newLocalFleet makes the fleet's Host; nothing runs yet. nodeBin is
// Options.NodeBinary.
func newLocalFleet(state, nodeBin string, out io.Writer) (*localFleet, error) {
	log := prefixed(out, "fleet: ")
	bin, err := kubebin.NewBuilder(kubebin.Options{Progress: log})
	if err != nil {
		return nil, err
	}
	// Worker machines run bex-node, built beside bex-embedded (make build).
	if exe, err := os.Executable(); nodeBin == "" && err == nil {
		if p := filepath.Join(filepath.Dir(exe), "bex-node"); statOK(p) {
			nodeBin = p
		}
	}
	host, err := localfleet.NewHost(localfleet.Options{Dir: filepath.Join(state, "fleet"), Binaries: bin, Log: log, Fsync: true,
		NodeBinary: nodeBin, NodeRegistryConfig: registryConfigPath(state)})
	if err != nil {
		return nil, fmt.Errorf("the local fleet's host: %w", err)
	}
	return &localFleet{host: host, dir: filepath.Join(state, "capi"), out: out, notReady: errFleetStarting}, nil
}

// Ready implements api.LocalFleet.
func (f *localFleet) Ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.notReady
}

// start starts Cluster API's managers in the background against the
// management apiserver of kubeconfig, and says so on f.out when they run
// or why they do not.
func (f *localFleet) start(ctx context.Context, kubeconfig string) {
	ctx, f.cancel = context.WithCancel(ctx)
	f.done = make(chan struct{})
	go func() {
		defer close(f.done)
		began := time.Now()
		ms, err := capi.Start(ctx, capi.Options{Kubeconfig: kubeconfig, Dir: f.dir, Log: prefixed(f.out, "capi: ")})
		if err == nil && f.afterStart != nil {
			defer func() {
				if err := f.afterStart(ctx); err != nil && ctx.Err() == nil {
					fmt.Fprintf(f.out, "bex: %v\n", err)
				}
			}()
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				f.notReady = errors.New("the platform is stopping")
				return
			}
			f.notReady = fmt.Errorf("Cluster API's managers did not start: %w; make run's output and %s say more, and the next make run tries again", err, filepath.Join(f.dir, "logs"))
			fmt.Fprintf(f.out, "bex: the local fleet did not start (the rest of the platform runs): %v\n", err)
			return
		}
		f.managers, f.notReady = ms, nil
		fmt.Fprintf(f.out, "bex: local fleet ready in %s: Cluster API's managers run (logs in %s); create a cluster with: bex fleet create NAME --version VERSION\n",
			time.Since(began).Round(time.Second), filepath.Join(f.dir, "logs"))
	}()
}

// stopManagers ends the background start, or stops the managers it
// started.
func (f *localFleet) stopManagers() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	<-f.done
	f.mu.Lock()
	ms := f.managers
	f.managers, f.notReady = nil, errors.New("the platform is stopping")
	f.mu.Unlock()
	if ms != nil {
		ms.Stop()
	}
}

// capiCRDsInstalled reports whether Cluster API's own CRDs, which only
// its managers' start installs (with their conversion webhooks and
// contract labels), are on the management cluster: the platform's copy of
// four of them (deploy/capi-crds) would then take those away until the
// managers start again.
func capiCRDsInstalled(ctx context.Context, cfg *rest.Config) (bool, error) {
	c, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return false, err
	}
	_, err = c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "kubeadmconfigs.bootstrap.cluster.x-k8s.io", metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("looking for Cluster API's CRDs: %w", err)
}

// statOK reports whether path exists.
func statOK(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
