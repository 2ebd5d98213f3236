package privatecache

import (
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Selector picks the objects a cache holds: those of Namespace ("": of
// every namespace) that Labels and Fields match (nil: every one).
type Selector struct {
	Namespace string
	Labels    labels.Selector
	Fields    fields.Selector
}

// Kind returns a source.Kind of obj's kind over a cache of its own that
// holds the objects sel picks, without their managed fields, and adds that
// cache to mgr, which starts and stops it. The cache is made with mgr's
// config, HTTP client, scheme and REST mapper; its size follows sel, not
// every object of the kind.
func Kind[T client.Object](mgr manager.Manager, sel Selector, obj T, h handler.TypedEventHandler[T, reconcile.Request]) (source.Source, error) {
	opts := cache.Options{
		HTTPClient:           mgr.GetHTTPClient(),
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultLabelSelector: sel.Labels,
		DefaultFieldSelector: sel.Fields,
		DefaultTransform:     cache.TransformStripManagedFields(),
	}
	if sel.Namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{sel.Namespace: {}}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("creating the cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding the cache to the manager: %w", err)
	}
	return source.Kind(c, obj, h), nil
}
