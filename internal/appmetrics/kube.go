package appmetrics

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

// KubeApps is an Apps source that lists the App objects of every tenant
// namespace: an app is sampled from its creation to its deletion.
func KubeApps(c client.Reader) func(context.Context) ([]Key, error) {
	return func(ctx context.Context) ([]Key, error) {
		var list platformv1alpha1.AppList
		if err := c.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("listing Apps: %w", err)
		}
		keys := make([]Key, 0, len(list.Items))
		for _, a := range list.Items {
			keys = append(keys, Key{Tenant: a.Namespace, App: a.Name})
		}
		return keys, nil
	}
}
