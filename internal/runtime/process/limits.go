package process

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/sandbox"
)

// limitsOf turns a release's resources into a sandbox's limits: memory
// and CPU as given (the sandbox's defaults where empty).
func limitsOf(r runtime.Resources) (sandbox.Limits, error) {
	var l sandbox.Limits
	if r.Memory != "" {
		q, err := resource.ParseQuantity(r.Memory)
		if err != nil || q.Sign() <= 0 {
			return l, fmt.Errorf("invalid memory %q: want a quantity such as 512Mi", r.Memory)
		}
		l.Memory = q.Value()
	}
	if r.CPU != "" {
		q, err := resource.ParseQuantity(r.CPU)
		if err != nil || q.Sign() <= 0 {
			return l, fmt.Errorf("invalid cpu %q: want a quantity such as 500m", r.CPU)
		}
		l.CPUMilli = q.MilliValue()
	}
	return l, nil
}
