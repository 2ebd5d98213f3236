package fleetstate

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// nodeWatch holds the Nodes of one workload cluster in an informer.
type nodeWatch struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc

	mu        sync.Mutex
	lastErr   error
	lastErrAt time.Time
}

// startNodeWatch watches the Nodes of the cluster of kubeconfig; changed
// gets every event of the watch, a failed read as an update, and an update
// when the first read is in (the cluster's nodes can be counted, even none)
// and when grace has passed since a failed read (the cluster may count as
// healthy again: a change the clock makes).
func startNodeWatch(ctx context.Context, kubeconfig []byte, grace time.Duration, changed cache.ResourceEventHandler) (*nodeWatch, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("parsing kubeconfig: %w", err)
	}
	cfg.UserAgent = "bex-apiserver/fleetstate"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &nodeWatch{cancel: cancel}
	w.informer = informers.NewSharedInformerFactory(cs, 0).Core().V1().Nodes().Informer()
	if err := w.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		w.mu.Lock()
		w.lastErr, w.lastErrAt = err, time.Now()
		w.mu.Unlock()
		changed.OnUpdate(nil, nil)
		// Past the grace the error no longer counts (recentError).
		time.AfterFunc(grace, func() {
			if ctx.Err() == nil {
				changed.OnUpdate(nil, nil)
			}
		})
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("setting watch error handler: %w", err)
	}
	if _, err := w.informer.AddEventHandler(changed); err != nil {
		cancel()
		return nil, fmt.Errorf("watching nodes: %w", err)
	}
	go w.informer.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
			changed.OnUpdate(nil, nil)
		}
	}()
	return w, nil
}

func (w *nodeWatch) synced() bool { return w.informer.HasSynced() }

func (w *nodeWatch) stop() { w.cancel() }

// recentError returns the last error of the watch if it happened within
// grace.
func (w *nodeWatch) recentError(grace time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lastErr != nil && time.Since(w.lastErrAt) < grace {
		return w.lastErr
	}
	return nil
}

func (w *nodeWatch) node(name string) (*corev1.Node, bool) {
	obj, ok, err := w.informer.GetIndexer().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	n, ok := obj.(*corev1.Node)
	return n, ok
}
