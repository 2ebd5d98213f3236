package validation

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apis/scheduling/v1alpha1"
)

// plans returns the tenant plans a placement may name.
func plans() []string { return []string{"starter", "standard", "pro"} }

// ValidatePlacement checks a Placement being created.
func ValidatePlacement(p *scheduling.Placement) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMeta(&p.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(errs, validatePlacementSpec(&p.Spec, field.NewPath("spec"))...)
}

// ValidatePlacementUpdate checks an update of a Placement: the app it binds
// cannot change; cluster, pool and scale can (a move or a rescale).
func ValidatePlacementUpdate(p, old *scheduling.Placement) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMetaUpdate(&p.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	errs = append(errs, validatePlacementSpec(&p.Spec, field.NewPath("spec"))...)
	return append(errs, apimachineryvalidation.ValidateImmutableField(p.Spec.App, old.Spec.App, field.NewPath("spec", "app"))...)
}

func validatePlacementSpec(s *scheduling.PlacementSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateDNSLabel(s.App, path.Child("app"))...)
	errs = append(errs, validateDNSLabel(s.Cluster, path.Child("cluster"))...)
	errs = append(errs, validateDNSLabel(s.Pool, path.Child("pool"))...)
	errs = append(errs, validatePlan(s.Plan, path.Child("plan"))...)
	if s.Replicas < 0 {
		errs = append(errs, field.Invalid(path.Child("replicas"), s.Replicas, "must not be negative"))
	}
	errs = append(errs, validateResources(&s.Resources, path.Child("resources"))...)
	if m := s.MovedFrom; m != nil {
		mp := path.Child("movedFrom")
		errs = append(errs, validateDNSLabel(m.Cluster, mp.Child("cluster"))...)
		errs = append(errs, validateDNSLabel(m.Pool, mp.Child("pool"))...)
		if m.Reason == "" {
			errs = append(errs, field.Required(mp.Child("reason"), "why the app moved"))
		}
	}
	return errs
}

// ValidatePlacementReview checks a PlacementReview being created.
func ValidatePlacementReview(r *scheduling.PlacementReview) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec")
	if r.Spec.App != "" {
		errs = append(errs, validateDNSLabel(r.Spec.App, path.Child("app"))...)
	}
	if r.Spec.Replicas < 1 {
		errs = append(errs, field.Invalid(path.Child("replicas"), r.Spec.Replicas, "must be at least 1"))
	}
	errs = append(errs, validateResources(&r.Spec.Resources, path.Child("resources"))...)
	c := path.Child("constraints")
	errs = append(errs, validatePlan(r.Spec.Constraints.Plan, c.Child("plan"))...)
	if r.Spec.Constraints.Pool != "" {
		errs = append(errs, validateDNSLabel(r.Spec.Constraints.Pool, c.Child("pool"))...)
	}
	if r.Spec.Resources.CPU.IsZero() && r.Spec.Resources.Memory.IsZero() && r.Spec.Constraints.Plan == "" {
		errs = append(errs, field.Required(path.Child("resources"), "give resources or constraints.plan"))
	}
	switch r.Spec.Candidates {
	case "", v1alpha1.CandidatesAll, v1alpha1.CandidatesNone:
	default:
		errs = append(errs, field.NotSupported(path.Child("candidates"), r.Spec.Candidates, []string{v1alpha1.CandidatesAll, v1alpha1.CandidatesNone}))
	}
	if ref := r.Spec.Reserve; ref != nil {
		rp := path.Child("reserve")
		errs = append(errs, validateDNSLabel(ref.Namespace, rp.Child("namespace"))...)
		if ref.Name == "" {
			errs = append(errs, field.Required(rp.Child("name"), ""))
		} else {
			for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(ref.Name, false) {
				errs = append(errs, field.Invalid(rp.Child("name"), ref.Name, msg))
			}
		}
	}
	return errs
}

func validateDNSLabel(v string, path *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(path, v, msg))
	}
	return errs
}

func validatePlan(v string, path *field.Path) field.ErrorList {
	if v == "" {
		return nil
	}
	if slices.Contains(plans(), v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(path, v, plans())}
}

func validateResources(r *scheduling.Resources, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, q := range []struct {
		name string
		q    resource.Quantity
	}{{"cpu", r.CPU}, {"memory", r.Memory}} {
		if q.q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child(q.name), q.q.String(), "must not be negative"))
		}
	}
	return errs
}
