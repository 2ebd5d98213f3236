package platformtest

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HasCondition is a check for Eventually's conditions: nil when conds hold
// a condition of type typ with status and reason (each "" for any), else an
// error that says what conds hold of typ instead.
func HasCondition(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) error {
	c := meta.FindStatusCondition(conds, typ)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition", typ)
	case (status == "" || c.Status == status) && (reason == "" || c.Reason == reason):
		return nil
	}
	return fmt.Errorf("%s is %s (%s): %s", typ, c.Status, c.Reason, c.Message)
}
