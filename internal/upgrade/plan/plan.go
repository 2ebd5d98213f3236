package plan

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
)

// ManagementLabel marks the management cluster's Cluster object; its value
// must be "true". The management cluster is always upgraded last.
const ManagementLabel = "bex.co/management"

// Stage names that no wave of a FleetUpgrade can take (wave names are DNS
// labels), except CanaryStage, which the API reserves for the canary.
const (
	// CanaryStage is the stage of the canary cluster.
	CanaryStage = "canary"
	// RemainingStage holds the selected clusters that no wave selects.
	RemainingStage = "(remaining)"
	// ManagementStage holds the management cluster.
	ManagementStage = "(management)"
)

// StageKind says why a stage exists.
type StageKind string

// The stage kinds.
const (
	StageCanary     StageKind = "Canary"
	StageWave       StageKind = "Wave"
	StageRemaining  StageKind = "Remaining"
	StageManagement StageKind = "Management"
)

// Reasons a cluster is refused or skipped.
const (
	// ReasonAlreadyAtTarget: the control plane runs the target version (or
	// a later patch of it); the cluster is skipped.
	ReasonAlreadyAtTarget = "AlreadyAtTarget"
	// ReasonTooFarBehind: the control plane is more than one minor version
	// below the target.
	ReasonTooFarBehind = "TooFarBehind"
	// ReasonAheadOfTarget: the control plane runs a later minor version than
	// the target; a downgrade is not an upgrade.
	ReasonAheadOfTarget = "AheadOfTarget"
	// ReasonNotFromVersion: spec.fromVersion is set and the cluster runs
	// another minor version.
	ReasonNotFromVersion = "NotFromVersion"
	// ReasonNoControlPlane: the Cluster has no KubeadmControlPlane, so this
	// subsystem cannot upgrade it.
	ReasonNoControlPlane = "NoKubeadmControlPlane"
	// ReasonUnknownVersion: the control plane's version cannot be parsed.
	ReasonUnknownVersion = "UnknownVersion"
)

// ErrInvalidSpec is every error about a FleetUpgrade spec that cannot be
// planned (errors.Is). It is terminal: the spec must change.
var ErrInvalidSpec = errors.New("invalid FleetUpgrade spec")

// InvalidSpecError is the error Compute returns for a spec it cannot plan:
// what is wrong, field by field. It is ErrInvalidSpec.
type InvalidSpecError struct {
	// Errs has one error per field, with the field's path in the
	// FleetUpgrade (spec.canaryCluster), in the order Compute checks them.
	// Its Detail names other fields as the spec's children (clusterSelector).
	Errs field.ErrorList
}

// Error writes every field error as Describe does, after ErrInvalidSpec's
// text.
func (e *InvalidSpecError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, fe := range e.Errs {
		msgs[i] = Describe(fe.Field, fe)
	}
	return ErrInvalidSpec.Error() + ": " + strings.Join(msgs, "; ")
}

// Is reports whether target is ErrInvalidSpec.
func (e *InvalidSpecError) Is(target error) bool { return target == ErrInvalidSpec }

// Describe writes one of Compute's field errors as a sentence about the
// field at path, which is fe.Field or the caller's name for that field: a
// value that does not parse reads "spec.targetVersion: parsing version
// ...", a cluster that is missing or not allowed reads "spec.canaryCluster
// fleet/a does not exist or ...".
func Describe(path string, fe *field.Error) string {
	switch fe.Type {
	case field.ErrorTypeNotFound, field.ErrorTypeForbidden:
		return fmt.Sprintf("%s %v %s", path, fe.BadValue, fe.Detail)
	}
	return path + ": " + fe.Detail
}

// Input is what the plan is computed from.
type Input struct {
	// Upgrade is the FleetUpgrade; only its spec is read.
	Upgrade *fleetv1.FleetUpgrade
	// Clusters are the Cluster API Clusters of every namespace; the plan
	// selects among them with spec.clusterSelector.
	Clusters []clusterv1.Cluster
	// ControlPlanes are the KubeadmControlPlanes the Clusters reference
	// (spec.controlPlaneRef, in the Cluster's namespace). Extra ones are
	// ignored.
	ControlPlanes []controlplanev1.KubeadmControlPlane
}

// Plan is the ordered upgrade of a fleet.
type Plan struct {
	// Target is spec.targetVersion, normalised with a leading "v".
	Target string
	// Stages run one after the other; empty stages are left out.
	Stages []Stage
	// Skipped are selected clusters that already run the target version.
	Skipped []Decision
	// Refused are selected clusters the upgrade cannot take, with why.
	Refused []Decision
}

// Stage is a group of clusters upgraded together.
type Stage struct {
	// Name is "canary", a wave's name, RemainingStage or ManagementStage.
	Name string
	// Kind says why the stage exists.
	Kind StageKind
	// MaxParallel is how many clusters of the stage may be upgraded at once
	// (at least 1).
	MaxParallel int32
	// Clusters are ordered by namespace/name.
	Clusters []Cluster
}

// Cluster is one cluster's place in the plan.
type Cluster struct {
	// Key is the Cluster's namespace and name.
	Key types.NamespacedName
	// ControlPlane is its KubeadmControlPlane's namespace and name.
	ControlPlane types.NamespacedName
	// FromVersion is the lowest version its control plane runs now.
	FromVersion string
	// ToVersion is the plan's target.
	ToVersion string
	// Management is true for the management cluster.
	Management bool
	// Topology is true when the Cluster uses a ClusterClass: its version is
	// bumped in spec.topology.version, not on the KubeadmControlPlane.
	Topology bool
}

// Decision is a selected cluster the plan does not upgrade, and why.
type Decision struct {
	Key     types.NamespacedName
	Version string
	// Reason is one of the Reason constants of this package.
	Reason string
	// Message says what is wrong and what to do.
	Message string
}

// Name is the cluster's "namespace/name", the key of the FleetUpgrade's
// status.clusters.
func (c Cluster) Name() string { return c.Key.String() }

// Clusters returns every planned cluster in upgrade order.
func (p *Plan) Clusters() []Cluster {
	var out []Cluster
	for _, s := range p.Stages {
		out = append(out, s.Clusters...)
	}
	return out
}

// StageOf returns the name of the stage that holds the cluster, or "" when
// the plan does not upgrade it.
func (p *Plan) StageOf(key types.NamespacedName) string {
	for _, s := range p.Stages {
		for _, c := range s.Clusters {
			if c.Key == key {
				return s.Name
			}
		}
	}
	return ""
}

// Compute returns the plan of a FleetUpgrade. When the spec cannot be
// planned (an unparsable version or selector, a canary that does not
// exist, is not selected, or is the management cluster) it returns an
// *InvalidSpecError with every such field.
func Compute(in Input) (*Plan, error) {
	if in.Upgrade == nil {
		return nil, fmt.Errorf("%w: no FleetUpgrade", ErrInvalidSpec)
	}
	spec := in.Upgrade.Spec
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	target, err := parseVersion(spec.TargetVersion)
	if err != nil {
		errs = append(errs, field.Invalid(specPath.Child("targetVersion"), spec.TargetVersion, err.Error()))
	}
	var from *version.Version
	if spec.FromVersion != "" {
		if from, err = parseVersion(spec.FromVersion); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("fromVersion"), spec.FromVersion, err.Error()))
		}
	}
	selector, selectorErr := metav1.LabelSelectorAsSelector(&spec.ClusterSelector)
	if selectorErr != nil {
		errs = append(errs, field.Invalid(specPath.Child("clusterSelector"), spec.ClusterSelector, selectorErr.Error()))
	}
	waveSelectors := make([]labels.Selector, len(spec.Waves))
	for i, w := range spec.Waves {
		if waveSelectors[i], err = metav1.LabelSelectorAsSelector(&w.ClusterSelector); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("waves").Index(i).Child("clusterSelector"), w.ClusterSelector, err.Error()))
		}
	}
	var selected []*clusterv1.Cluster
	if selectorErr == nil {
		selected = sortedClusters(in.Clusters, selector)
		errs = append(errs, validateCanary(spec.CanaryCluster, selected, specPath.Child("canaryCluster"))...)
	}
	if len(errs) > 0 {
		return nil, &InvalidSpecError{Errs: errs}
	}

	kcps := make(map[types.NamespacedName]*controlplanev1.KubeadmControlPlane, len(in.ControlPlanes))
	for i := range in.ControlPlanes {
		kcp := &in.ControlPlanes[i]
		kcps[types.NamespacedName{Namespace: kcp.Namespace, Name: kcp.Name}] = kcp
	}

	p := &Plan{Target: "v" + target.String()}
	var canaryKey *types.NamespacedName
	if c := spec.CanaryCluster; c != nil {
		canaryKey = &types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	}

	// Decide for each selected cluster: upgrade, skip or refuse.
	var upgrade []Cluster
	byKey := map[types.NamespacedName]*clusterv1.Cluster{}
	for _, c := range selected {
		byKey[keyOf(c)] = c
		pc, decision := decide(c, kcps, target, from)
		switch {
		case decision == nil:
			upgrade = append(upgrade, pc)
		case decision.Reason == ReasonAlreadyAtTarget:
			p.Skipped = append(p.Skipped, *decision)
		default:
			p.Refused = append(p.Refused, *decision)
		}
	}

	assigned := sets.New[types.NamespacedName]()
	take := func(match func(Cluster) bool) []Cluster {
		var out []Cluster
		for _, c := range upgrade {
			if assigned.Has(c.Key) || !match(c) {
				continue
			}
			assigned.Insert(c.Key)
			out = append(out, c)
		}
		return out
	}
	maxParallel := atLeastOne(spec.MaxParallelClusters)

	// The management cluster is kept out of every other stage.
	mgmt := take(func(c Cluster) bool { return c.Management })

	if canaryKey != nil {
		p.addStage(Stage{Name: CanaryStage, Kind: StageCanary, MaxParallel: 1,
			Clusters: take(func(c Cluster) bool { return c.Key == *canaryKey })})
	}
	for i, w := range spec.Waves {
		sel := waveSelectors[i]
		p.addStage(Stage{Name: w.Name, Kind: StageWave, MaxParallel: min(atLeastOne(w.MaxParallel), maxParallel),
			Clusters: take(func(c Cluster) bool { return sel.Matches(labels.Set(byKey[c.Key].Labels)) })})
	}
	p.addStage(Stage{Name: RemainingStage, Kind: StageRemaining, MaxParallel: maxParallel,
		Clusters: take(func(Cluster) bool { return true })})
	p.addStage(Stage{Name: ManagementStage, Kind: StageManagement, MaxParallel: 1, Clusters: mgmt})
	return p, nil
}

// validateCanary checks that the canary, if any, is among the selected
// clusters and is not the management cluster.
func validateCanary(canary *fleetv1.ClusterReference, selected []*clusterv1.Cluster, fldPath *field.Path) field.ErrorList {
	if canary == nil {
		return nil
	}
	k := types.NamespacedName{Namespace: canary.Namespace, Name: canary.Name}
	for _, c := range selected {
		if keyOf(c) != k {
			continue
		}
		if isManagement(c) {
			forbidden := field.Forbidden(fldPath, "is the management cluster, which is always upgraded last")
			forbidden.BadValue = k.String()
			return field.ErrorList{forbidden}
		}
		return nil
	}
	notFound := field.NotFound(fldPath, k.String())
	notFound.Detail = "does not exist or does not match clusterSelector"
	return field.ErrorList{notFound}
}

func (p *Plan) addStage(s Stage) {
	if len(s.Clusters) == 0 {
		return
	}
	if s.MaxParallel > int32(len(s.Clusters)) {
		s.MaxParallel = int32(len(s.Clusters))
	}
	p.Stages = append(p.Stages, s)
}

// decide returns the planned cluster, or the decision not to upgrade it.
func decide(c *clusterv1.Cluster, kcps map[types.NamespacedName]*controlplanev1.KubeadmControlPlane, target, from *version.Version) (Cluster, *Decision) {
	key := keyOf(c)
	ref := c.Spec.ControlPlaneRef
	if ref.Kind != "KubeadmControlPlane" || ref.Name == "" {
		return Cluster{}, &Decision{Key: key, Reason: ReasonNoControlPlane,
			Message: fmt.Sprintf("cluster %s has no KubeadmControlPlane (controlPlaneRef kind %q): fleet upgrades drive KubeadmControlPlane rollouts only; upgrade it by hand or remove it from spec.clusterSelector", key, ref.Kind)}
	}
	kcpKey := types.NamespacedName{Namespace: c.Namespace, Name: ref.Name}
	kcp, ok := kcps[kcpKey]
	if !ok {
		return Cluster{}, &Decision{Key: key, Reason: ReasonNoControlPlane,
			Message: fmt.Sprintf("cluster %s references KubeadmControlPlane %s, which does not exist", key, kcpKey)}
	}
	current, raw, err := CurrentVersion(kcp)
	if err != nil {
		return Cluster{}, &Decision{Key: key, Version: raw, Reason: ReasonUnknownVersion,
			Message: fmt.Sprintf("cluster %s: cannot read the control plane version: %v", key, err)}
	}
	cur := "v" + current.String()
	tgt := "v" + target.String()
	switch {
	case current.Major() != target.Major() || current.Minor() > target.Minor():
		return Cluster{}, &Decision{Key: key, Version: cur, Reason: ReasonAheadOfTarget,
			Message: fmt.Sprintf("cluster %s runs %s, later than the target %s: downgrades are not supported; remove it from spec.clusterSelector", key, trimV(cur), trimV(tgt))}
	case current.Minor() == target.Minor() && !current.LessThan(target):
		return Cluster{}, &Decision{Key: key, Version: cur, Reason: ReasonAlreadyAtTarget,
			Message: fmt.Sprintf("cluster %s already runs %s", key, trimV(cur))}
	case current.Minor()+1 < target.Minor():
		return Cluster{}, &Decision{Key: key, Version: cur, Reason: ReasonTooFarBehind,
			Message: fmt.Sprintf("cluster %s runs %s: upgrade it to 1.%d first; one minor version at a time", key, trimV(cur), current.Minor()+1)}
	case from != nil && (current.Major() != from.Major() || current.Minor() != from.Minor()):
		return Cluster{}, &Decision{Key: key, Version: cur, Reason: ReasonNotFromVersion,
			Message: fmt.Sprintf("cluster %s runs %s, not spec.fromVersion %s: remove it from spec.clusterSelector or change spec.fromVersion", key, trimV(cur), strings.TrimPrefix(from.String(), "v"))}
	}
	return Cluster{
		Key:          key,
		ControlPlane: kcpKey,
		FromVersion:  cur,
		ToVersion:    tgt,
		Management:   isManagement(c),
		Topology:     c.Spec.Topology.ClassRef.Name != "",
	}, nil
}

// CurrentVersion returns the lowest Kubernetes version the control plane
// runs or is asked to run: the least of spec.version, status.versions and
// (when status.versions is empty) the deprecated status.version. A control
// plane halfway through a rollout therefore reports its old version. The
// string is the raw value that failed to parse, for messages.
func CurrentVersion(kcp *controlplanev1.KubeadmControlPlane) (*version.Version, string, error) {
	raws := []string{kcp.Spec.Version}
	for _, v := range kcp.Status.Versions {
		raws = append(raws, v.Version)
	}
	if len(kcp.Status.Versions) == 0 && kcp.Status.Version != "" {
		raws = append(raws, kcp.Status.Version)
	}
	var lowest *version.Version
	for _, raw := range raws {
		if raw == "" {
			continue
		}
		v, err := parseVersion(raw)
		if err != nil {
			return nil, raw, err
		}
		if lowest == nil || v.LessThan(lowest) {
			lowest = v
		}
	}
	if lowest == nil {
		return nil, "", errors.New("no version in spec or status")
	}
	return lowest, "", nil
}

func parseVersion(s string) (*version.Version, error) {
	v, err := version.ParseSemantic(strings.TrimPrefix(strings.TrimSpace(s), "v"))
	if err != nil {
		return nil, fmt.Errorf("parsing version %q: %w", s, err)
	}
	return v, nil
}

func sortedClusters(all []clusterv1.Cluster, selector labels.Selector) []*clusterv1.Cluster {
	var out []*clusterv1.Cluster
	for i := range all {
		if selector.Matches(labels.Set(all[i].Labels)) {
			out = append(out, &all[i])
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func keyOf(c *clusterv1.Cluster) types.NamespacedName {
	return types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
}

func isManagement(c *clusterv1.Cluster) bool { return c.Labels[ManagementLabel] == "true" }

func atLeastOne(n int32) int32 {
	if n < 1 {
		return 1
	}
	return n
}

func trimV(s string) string { return strings.TrimPrefix(s, "v") }
