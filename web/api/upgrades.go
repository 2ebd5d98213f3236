package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/retry"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/web/api/apiclient"
)

// Fleet upgrades, for operators: planning, starting, pausing, resuming
// and aborting them. What the API shows of them is in upgradeviews.go.
//
// A FleetUpgrade is cluster-scoped (its CRD says so), so it lives in no
// namespace and the API creates none. The API writes only the spec: the
// FleetUpgrade controller does the rollout and reports in the status, and
// records each run in Postgres (internal/store, upgrade_runs). Plans and
// new FleetUpgrades are validated by the apiserver (a dry-run create for a
// plan; the CRD's OpenAPI and CEL rules are the only rules), then planned.
// The apiserver's refusals and the planner's are answered 422 on the
// request's field, found from the field paths of the apiserver's causes
// and of the planner's field.ErrorList.

// upgradeSpecFields maps the FleetUpgrade's fields to the request's, for
// the field paths of the apiserver's and the planner's refusals.
var upgradeSpecFields = []struct{ spec, field string }{
	{"metadata.name", "name"},
	{"spec.targetVersion", "targetVersion"},
	{"spec.fromVersion", "fromVersion"},
	{"spec.clusterSelector", "clusterSelector"},
	{"spec.canaryCluster", "canaryCluster"},
	{"spec.waves", "waves"},
	{"spec.maxParallelClusters", "maxParallelClusters"},
	{"spec.soakTime", "soak"},
	{"spec.wireMVP", "wireMVP"},
}

// requestField turns a FleetUpgrade field path (spec.waves[0].name) into
// the request's (waves[0].name); "" when the request has no such field.
func requestField(path string) string {
	for _, f := range upgradeSpecFields {
		if rest, ok := strings.CutPrefix(path, f.spec); ok {
			return f.field + rest
		}
	}
	return ""
}

// invalidUpgrade turns the apiserver's Invalid answer into a 422 on the
// first request field its causes name (targetVersion when they name none),
// with every cause in the message.
func invalidUpgrade(err error) error {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Details == nil || len(se.Status().Details.Causes) == 0 {
		return invalid("targetVersion", "the cluster refused the fleet upgrade: %v", err)
	}
	first := ""
	var msgs []string
	for _, c := range se.Status().Details.Causes {
		f := cmp.Or(requestField(c.Field), c.Field)
		if first == "" && requestField(c.Field) != "" {
			first = f
		}
		msgs = append(msgs, f+": "+causeMessage(c))
	}
	return invalid(cmp.Or(first, "targetVersion"), "the cluster refused the fleet upgrade: %s", strings.Join(msgs, "; "))
}

// causeMessage is what the apiserver says of one field, without the
// "Invalid value: " its cause type adds and the field path its schema
// errors repeat ("spec.maxParallelClusters in body should be"), and with
// the spec's field names, as the CRD's CEL messages write them, written as
// the request's.
func causeMessage(c metav1.StatusCause) string {
	msg := strings.TrimPrefix(c.Message, "Invalid value: ")
	if c.Field != "" {
		msg = strings.ReplaceAll(msg, c.Field+" in body ", "")
	}
	for _, f := range upgradeSpecFields {
		msg = strings.ReplaceAll(msg, f.spec, f.field)
	}
	return msg
}

// invalidPlan turns the planner's field errors into a 422 on the request
// field of the first, with every error in the message on the request's
// name for its field.
func invalidPlan(errs field.ErrorList) error {
	first := "targetVersion"
	if len(errs) > 0 {
		first = cmp.Or(requestField(errs[0].Field), first)
	}
	msgs := make([]string, len(errs))
	for i, fe := range errs {
		msgs[i] = plan.Describe(cmp.Or(requestField(fe.Field), fe.Field), fe)
	}
	return invalid(first, "%s", strings.Join(msgs, "; "))
}

// noClusterAPI answers when the management cluster does not serve Cluster
// API's kinds.
func noClusterAPI(err error) error {
	return &httpError{status: http.StatusServiceUnavailable,
		message: fmt.Sprintf("the management cluster does not serve Cluster API v1beta2 (%v): install Cluster API (clusterctl init) before planning or starting a fleet upgrade", err)}
}

// parseSelector reads a label selector in kubectl's syntax as a 422 on
// field.
func parseSelector(field, s string) (metav1.LabelSelector, error) {
	if strings.TrimSpace(s) == "" {
		return metav1.LabelSelector{}, nil
	}
	sel, err := metav1.ParseToLabelSelector(s)
	if err != nil {
		return metav1.LabelSelector{}, invalid(field, "selector %q: %v (write it as kubectl -l does: env=prod,tier!=db,zone in (a,b))", s, err)
	}
	return *sel, nil
}

// upgradeSpec builds a FleetUpgrade spec from the request's fields; what
// it can check before the apiserver does is answered 422.
func upgradeSpec(req apiclient.UpgradePlanRequest, soak string, wireMVP bool) (fleetv1.FleetUpgradeSpec, error) {
	spec := fleetv1.FleetUpgradeSpec{
		TargetVersion:       strings.TrimSpace(req.TargetVersion),
		FromVersion:         strings.TrimSpace(req.FromVersion),
		MaxParallelClusters: req.MaxParallelClusters,
		WireMVP:             wireMVP,
	}
	if spec.TargetVersion == "" {
		return spec, invalid("targetVersion", "which version? give the Kubernetes version to upgrade to, such as v1.37.2")
	}
	var err error
	if spec.ClusterSelector, err = parseSelector("clusterSelector", req.ClusterSelector); err != nil {
		return spec, err
	}
	if req.CanaryCluster != "" {
		ns, name, ok := strings.Cut(req.CanaryCluster, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return spec, invalid("canaryCluster", "canary cluster %q: write it as NAMESPACE/NAME", req.CanaryCluster)
		}
		spec.CanaryCluster = &fleetv1.ClusterReference{Namespace: ns, Name: name}
	}
	for i, w := range req.Waves {
		sel, err := parseSelector(fmt.Sprintf("waves[%d].clusterSelector", i), w.ClusterSelector)
		if err != nil {
			return spec, err
		}
		spec.Waves = append(spec.Waves, fleetv1.Wave{Name: w.Name, MaxParallel: w.MaxParallel, ClusterSelector: sel})
	}
	if soak != "" {
		d, err := time.ParseDuration(soak)
		if err != nil {
			return spec, invalid("soak", "soak %q: want a duration such as 10m or 1h30m", soak)
		}
		spec.SoakTime = &metav1.Duration{Duration: d}
	}
	return spec, nil
}

// computePlan reads the fleet and plans fu over it.
func (s *Server) computePlan(ctx context.Context, fu *fleetv1.FleetUpgrade) (*plan.Plan, error) {
	var clusters clusterv1.ClusterList
	if err := s.kube.List(ctx, &clusters); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, noClusterAPI(err)
		}
		return nil, fmt.Errorf("listing clusters: %w", err)
	}
	var kcps controlplanev1.KubeadmControlPlaneList
	if err := s.kube.List(ctx, &kcps); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, noClusterAPI(err)
		}
		return nil, fmt.Errorf("listing kubeadm control planes: %w", err)
	}
	p, err := plan.Compute(plan.Input{Upgrade: fu, Clusters: clusters.Items, ControlPlanes: kcps.Items})
	var invalidSpec *plan.InvalidSpecError
	if errors.As(err, &invalidSpec) {
		return nil, invalidPlan(invalidSpec.Errs)
	}
	return p, err
}

// createFleetUpgrade creates fu (only validates it with dryRun), mapping
// the apiserver's refusals to the request's fields.
func (s *Server) createFleetUpgrade(ctx context.Context, fu *fleetv1.FleetUpgrade, dryRun bool) error {
	var opts []client.CreateOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	err := s.kube.Create(ctx, fu, opts...)
	switch {
	case err == nil:
		return nil
	case apierrors.IsInvalid(err):
		return invalidUpgrade(err)
	case apierrors.IsAlreadyExists(err):
		return &httpError{status: http.StatusConflict, field: "name",
			message: fmt.Sprintf("fleet upgrade %q exists already: pick another name, or see it with bex upgrade status %s", fu.Name, fu.Name)}
	case meta.IsNoMatchError(err):
		return &httpError{status: http.StatusServiceUnavailable,
			message: fmt.Sprintf("the management cluster does not serve FleetUpgrades (%v): install bex's CRDs (deploy/crds)", err)}
	}
	return fmt.Errorf("creating fleet upgrade: %w", err)
}

func (s *Server) planUpgrade(c echo.Context) error {
	var req apiclient.UpgradePlanRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	spec, err := upgradeSpec(req, "", false)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	// A dry-run create: the CRD's rules check the spec, its defaults fill
	// it in, and nothing is written.
	fu := &fleetv1.FleetUpgrade{ObjectMeta: metav1.ObjectMeta{GenerateName: "plan-"}, Spec: spec}
	if err := s.createFleetUpgrade(ctx, fu, true); err != nil {
		return err
	}
	p, err := s.computePlan(ctx, fu)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, planView(p))
}

func (s *Server) createUpgrade(c echo.Context) error {
	var req apiclient.CreateUpgradeRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	if strings.TrimSpace(req.Name) == "" {
		return invalid("name", "a fleet upgrade needs a name, such as to-1-37")
	}
	spec, err := upgradeSpec(apiclient.UpgradePlanRequest{
		TargetVersion: req.TargetVersion, FromVersion: req.FromVersion, ClusterSelector: req.ClusterSelector,
		CanaryCluster: req.CanaryCluster, Waves: req.Waves, MaxParallelClusters: req.MaxParallelClusters,
	}, req.Soak, req.WireMVP)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	fu := &fleetv1.FleetUpgrade{ObjectMeta: metav1.ObjectMeta{Name: req.Name}, Spec: spec}
	// Validate, then plan on the defaulted spec: a canary that does not
	// exist is refused now rather than as a condition later. Clusters the
	// plan refuses are not: the controller waits until they are fixed.
	dry := fu.DeepCopy()
	if err := s.createFleetUpgrade(ctx, dry, true); err != nil {
		return err
	}
	if _, err := s.computePlan(ctx, dry); err != nil {
		return err
	}
	if err := s.createFleetUpgrade(ctx, fu, false); err != nil {
		return err
	}
	s.audit(c, "upgrade.start", fu.Name, map[string]any{
		"targetVersion": spec.TargetVersion, "fromVersion": spec.FromVersion, "clusterSelector": req.ClusterSelector,
		"canaryCluster": req.CanaryCluster, "waves": len(spec.Waves), "wireMVP": spec.WireMVP, "soak": upgradeView(fu, nil).Soak,
	})
	return c.JSON(http.StatusCreated, upgradeView(fu, nil))
}

// getUpgradeObject reads the FleetUpgrade the path names.
func (s *Server) getUpgradeObject(c echo.Context) (*fleetv1.FleetUpgrade, error) {
	name := c.Param("name")
	fu := &fleetv1.FleetUpgrade{}
	if err := s.kube.Get(c.Request().Context(), types.NamespacedName{Name: name}, fu); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFound("fleet upgrade %q not found: bex upgrade status lists them", name)
		}
		if meta.IsNoMatchError(err) {
			return nil, notFound("fleet upgrade %q not found: the management cluster does not serve FleetUpgrades", name)
		}
		return nil, fmt.Errorf("reading fleet upgrade %s: %w", name, err)
	}
	return fu, nil
}

// What pause, resume and abort say happens now.
const (
	pausedMessage = "paused: no new cluster starts and no version is bumped; a cluster whose rollout runs stops at the next machine boundary " +
		"(after the machine being replaced has joined and been verified), never in the middle of a replacement. Resume with bex upgrade resume %s"
	resumedMessage = "resumed: the controller unpauses the Clusters it paused and the rollout goes on"
	abortedMessage = "aborted, for good: it cannot be resumed. Clusters not yet bumped are left as they are; a cluster in the middle of its " +
		"version rollout is paused at the next machine boundary and left paused, at mixed versions (finish it by hand: " +
		"kubectl patch cluster NAME -n NS --type merge -p '{\"spec\":{\"paused\":false}}'). To go on, start a new fleet upgrade"
)

func (s *Server) pauseUpgrade(c echo.Context) error  { return s.changeUpgrade(c, "pause") }
func (s *Server) resumeUpgrade(c echo.Context) error { return s.changeUpgrade(c, "resume") }
func (s *Server) abortUpgrade(c echo.Context) error  { return s.changeUpgrade(c, "abort") }

// changeUpgrade sets spec.paused or spec.abort. An aborted FleetUpgrade
// can be neither paused nor resumed (409). The patch is conditional on the
// object read, so a concurrent abort is never undone; when the object
// changed meanwhile (the controller writes its status all through a
// rollout), the change is read and decided again.
func (s *Server) changeUpgrade(c echo.Context, action string) error {
	var fu *fleetv1.FleetUpgrade
	var changed bool
	var message string
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var err error
		if fu, err = s.getUpgradeObject(c); err != nil {
			return err
		}
		before := fu.DeepCopy()
		if changed, message, err = applyUpgradeChange(fu, action); err != nil || !changed {
			return err
		}
		if err := s.kube.Patch(c.Request().Context(), fu, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("patching fleet upgrade %s: %w", fu.Name, err)
		}
		return nil
	})
	if apierrors.IsNotFound(err) {
		return notFound("fleet upgrade %q not found", c.Param("name"))
	}
	if err != nil {
		return err
	}
	if changed {
		s.audit(c, "upgrade."+action, fu.Name, map[string]any{"targetVersion": fu.Spec.TargetVersion})
	}
	return c.JSON(http.StatusOK, apiclient.UpgradeChange{Upgrade: upgradeView(fu, nil), Changed: changed, Message: message})
}

// applyUpgradeChange makes action's change to fu's spec and says whether
// it changed anything and what happens now.
func applyUpgradeChange(fu *fleetv1.FleetUpgrade, action string) (changed bool, message string, err error) {
	if fu.Spec.Abort && action != "abort" {
		return false, "", &httpError{status: http.StatusConflict, message: fmt.Sprintf(
			"fleet upgrade %s was aborted, which is final: it cannot be paused or resumed. Start a new fleet upgrade to go on "+
				"(bex upgrade start NAME --to %s); clusters it left paused at mixed versions are unpaused by hand", fu.Name, fu.Spec.TargetVersion)}
	}
	switch action {
	case "pause":
		changed, fu.Spec.Paused = !fu.Spec.Paused, true
		message = fmt.Sprintf(pausedMessage, fu.Name)
	case "resume":
		changed, fu.Spec.Paused = fu.Spec.Paused, false
		message = resumedMessage
		if p := meta.FindStatusCondition(fu.Status.Conditions, fleetv1.FleetUpgradePausedCondition); !changed && p != nil &&
			p.Status == metav1.ConditionTrue && p.Reason == fleetv1.FleetUpgradeGateFailedReason {
			message = "not paused by an operator: a gate holds it (" + p.Message + "); it goes on by itself once the verifier passes"
		} else if !changed {
			message = "not paused: nothing to resume"
		}
	case "abort":
		changed, fu.Spec.Abort = !fu.Spec.Abort, true
		message = abortedMessage
	}
	return changed, message, nil
}
