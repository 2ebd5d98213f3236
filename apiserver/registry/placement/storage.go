package placement

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apiserver/registry"
)

// REST is the storage of Placements.
type REST struct {
	*genericregistry.Store
}

// NewREST returns the Placement storage over the storage that optsGetter
// configures.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*REST, error) {
	s := newStrategy(scheme)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &scheduling.Placement{} },
		NewListFunc:               func() runtime.Object { return &scheduling.PlacementList{} },
		PredicateFunc:             matcher,
		DefaultQualifiedResource:  scheduling.Resource("placements"),
		SingularQualifiedResource: scheduling.Resource("placement"),
		CreateStrategy:            s,
		UpdateStrategy:            s,
		DeleteStrategy:            s,
		TableConvertor: registry.Table[*scheduling.Placement]{
			Columns: []metav1.TableColumnDefinition{
				{Name: "App", Type: "string"},
				{Name: "Cluster", Type: "string"},
				{Name: "Pool", Type: "string"},
				{Name: "Replicas", Type: "integer"},
				{Name: "CPU", Type: "string", Description: "per replica"},
				{Name: "Memory", Type: "string", Description: "per replica"},
			},
			Cells: func(p *scheduling.Placement) []any {
				return []any{p.Spec.App, p.Spec.Cluster, p.Spec.Pool, int64(p.Spec.Replicas), p.Spec.Resources.CPU.String(), p.Spec.Resources.Memory.String()}
			},
		},
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: getAttrs}); err != nil {
		return nil, fmt.Errorf("completing placement storage: %w", err)
	}
	return &REST{Store: store}, nil
}
