package placement

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apis/scheduling/validation"
)

// strategy is the create, update and delete behaviour of Placements.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

func newStrategy(typer runtime.ObjectTyper) strategy {
	return strategy{typer, names.SimpleNameGenerator}
}

func (strategy) NamespaceScoped() bool                                            { return true }
func (strategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (strategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}
func (strategy) AllowCreateOnUpdate(context.Context) bool                         { return false }
func (strategy) AllowUnconditionalUpdate(context.Context) bool                    { return true }
func (strategy) Canonicalize(runtime.Object)                                      {}
func (strategy) WarningsOnCreate(context.Context, runtime.Object) []string        { return nil }
func (strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

func (strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidatePlacement(obj.(*scheduling.Placement))
}

func (strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidatePlacementUpdate(obj.(*scheduling.Placement), old.(*scheduling.Placement))
}

// getAttrs returns the labels and the selectable fields of a Placement:
// metadata.name, metadata.namespace, spec.app, spec.cluster and spec.pool.
func getAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	p, ok := obj.(*scheduling.Placement)
	if !ok {
		return nil, nil, errors.New("not a Placement")
	}
	fs := generic.ObjectMetaFieldsSet(&p.ObjectMeta, true)
	fs["spec.app"] = p.Spec.App
	fs["spec.cluster"] = p.Spec.Cluster
	fs["spec.pool"] = p.Spec.Pool
	return labels.Set(p.Labels), fs, nil
}

func matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: getAttrs}
}
