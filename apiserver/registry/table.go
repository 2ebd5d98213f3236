package registry

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Table renders objects of type T as kubectl's table: Name, the given
// columns, then Age.
type Table[T runtime.Object] struct {
	// Columns after Name and before Age.
	Columns []metav1.TableColumnDefinition
	// Cells returns a row's cells for Columns.
	Cells func(T) []any
}

var _ rest.TableConvertor = Table[runtime.Object]{}

// ConvertToTable renders one object or a list.
func (t Table[T]) ConvertToTable(_ context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	row := func(obj runtime.Object) error {
		typed, ok := obj.(T)
		if !ok {
			return fmt.Errorf("rendering a table: unexpected %T", obj)
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return fmt.Errorf("rendering a table: %w", err)
		}
		cells := append([]any{m.GetName()}, t.Cells(typed)...)
		cells = append(cells, age(m.GetCreationTimestamp()))
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: obj}})
		return nil
	}
	if meta.IsListType(object) {
		if err := meta.EachListItem(object, row); err != nil {
			return nil, err
		}
		if l, err := meta.ListAccessor(object); err == nil {
			table.ResourceVersion, table.Continue, table.RemainingItemCount = l.GetResourceVersion(), l.GetContinue(), l.GetRemainingItemCount()
		}
	} else if err := row(object); err != nil {
		return nil, err
	}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || !opts.NoHeaders {
		table.ColumnDefinitions = append([]metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name"}}, t.Columns...)
		table.ColumnDefinitions = append(table.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Age", Type: "string"})
	}
	return table, nil
}

func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}
