package clustercapacity

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apiserver/registry"
)

// Capacities is what the storage reads: every cluster's capacity, sorted
// by name (scheduler.View implements it).
type Capacities interface {
	Capacities(ctx context.Context) ([]scheduling.ClusterCapacity, error)
}

// REST serves ClusterCapacity.
type REST struct {
	view Capacities
	rest.TableConvertor
}

var (
	_ rest.Getter               = (*REST)(nil)
	_ rest.Lister               = (*REST)(nil)
	_ rest.Scoper               = (*REST)(nil)
	_ rest.SingularNameProvider = (*REST)(nil)
	_ rest.Storage              = (*REST)(nil)
)

// NewREST returns the ClusterCapacity storage over view.
func NewREST(view Capacities) (*REST, error) {
	if view == nil {
		return nil, errors.New("clustercapacity: nil view")
	}
	return &REST{view: view, TableConvertor: table()}, nil
}

func table() registry.Table[*scheduling.ClusterCapacity] {
	return registry.Table[*scheduling.ClusterCapacity]{
		Columns: []metav1.TableColumnDefinition{
			{Name: "Region", Type: "string"},
			{Name: "Versions", Type: "string", Description: "control-plane Kubernetes versions"},
			{Name: "Accepts", Type: "boolean", Description: "takes new placements"},
			{Name: "Reason", Type: "string"},
			{Name: "Pools", Type: "integer"},
			{Name: "CPU", Type: "string", Description: "requested/allocatable"},
			{Name: "Memory", Type: "string", Description: "requested/allocatable"},
			{Name: "Pods", Type: "string", Description: "requested/allocatable"},
		},
		Cells: func(c *scheduling.ClusterCapacity) []any {
			s := &c.Status
			return []any{
				s.Region, strings.Join(s.ControlPlaneVersions, ","), s.AcceptsPlacements, s.Reason, int64(len(s.Pools)),
				s.Requested.CPU.String() + "/" + s.Allocatable.CPU.String(),
				s.Requested.Memory.String() + "/" + s.Allocatable.Memory.String(),
				fmt.Sprintf("%d/%d", s.Requested.Pods, s.Allocatable.Pods),
			}
		},
	}
}

// New returns an empty ClusterCapacity.
func (*REST) New() runtime.Object { return &scheduling.ClusterCapacity{} }

// NewList returns an empty ClusterCapacityList.
func (*REST) NewList() runtime.Object { return &scheduling.ClusterCapacityList{} }

// Destroy releases nothing: the storage holds no resources.
func (*REST) Destroy() {}

// NamespaceScoped is false: a cluster belongs to no tenant.
func (*REST) NamespaceScoped() bool { return false }

// GetSingularName returns "clustercapacity".
func (*REST) GetSingularName() string { return "clustercapacity" }

// Get returns one cluster's capacity.
func (r *REST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	caps, err := r.view.Capacities(ctx)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	for i := range caps {
		if caps[i].Name == name {
			return &caps[i], nil
		}
	}
	return nil, apierrors.NewNotFound(scheduling.Resource("clustercapacities"), name)
}

// List returns the capacities matching the label and field (metadata.name)
// selectors, sorted by name.
func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	caps, err := r.view.Capacities(ctx)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	ls, fs := labels.Everything(), fields.Everything()
	if options != nil && options.LabelSelector != nil {
		ls = options.LabelSelector
	}
	if options != nil && options.FieldSelector != nil {
		fs = options.FieldSelector
	}
	list := &scheduling.ClusterCapacityList{Items: make([]scheduling.ClusterCapacity, 0, len(caps))}
	for _, c := range caps {
		if ls.Matches(labels.Set(c.Labels)) && fs.Matches(fields.Set{"metadata.name": c.Name}) {
			list.Items = append(list.Items, c)
		}
	}
	return list, nil
}
