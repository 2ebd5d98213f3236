package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/localfleet"
	"bex.co/bex/web/api/apiclient"
)

// The local fleet, for operators: clusters whose machines are processes on
// the platform's own machine (controllers/localinfra), created and deleted
// through the API where the platform runs one (make run). The API writes
// the objects of a cluster (localinfra.ClusterObjects) and deletes its
// Cluster; Cluster API's managers and the local provider do the rest, and
// GET /fleet shows it as any other cluster. A platform without a local
// fleet (the cluster install) answers 501: its clusters come from a
// Cluster API provider such as CAPH.

// LocalFleet is the platform's local fleet as the API needs it: whether it
// can take clusters now. Ready must be safe for concurrent use.
type LocalFleet interface {
	// Ready returns nil once clusters can be created and deleted (Cluster
	// API's managers and their webhooks run), else an error that says why
	// not (still starting, or failed to start, and what to do).
	Ready() error
}

// LocalClusterNamespace is where local clusters are made.
const LocalClusterNamespace = apiclient.LocalClusterNamespace

// Bounds of a local cluster's control plane.
const (
	// MinLocalReplicas: KubeadmControlPlane rolls with maxSurge 0, which it
	// allows from three machines on (two keep serving while one is
	// replaced).
	MinLocalReplicas = 3
	// MaxLocalReplicas: every machine is a kube-apiserver process on the
	// platform's machine.
	MaxLocalReplicas = 5
	// MaxLocalWorkers: every worker is a node agent with a sandbox bridge
	// of its own on the platform's machine.
	MaxLocalWorkers = 4
	// maxLocalClusterName keeps the machines' names, <name>-control-plane-
	// and five characters (Cluster API's names for KubeadmControlPlane's
	// machines), a DNS label: they are the machines' hostnames and Nodes.
	maxLocalClusterName = 63 - len("-control-plane-") - 5
)

// localClusterName is the form of a local cluster's name.
var localClusterName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// errNoLocalFleet is the answer of a platform without a local fleet.
var errNoLocalFleet = &httpError{status: http.StatusNotImplemented,
	message: "this platform has no local fleet: its clusters come from Cluster API providers such as CAPH (Hetzner), " +
		"made with clusterctl or deploy/capi/hetzner's templates; local clusters run in make run only"}

// localFleetReady answers 503 while the local fleet cannot take clusters.
func (s *Server) localFleetReady(c echo.Context) error {
	if err := s.localFleet.Ready(); err != nil {
		c.Response().Header().Set("Retry-After", "30")
		return &httpError{status: http.StatusServiceUnavailable, message: fmt.Sprintf("the local fleet is not ready: %v", err)}
	}
	return nil
}

// localClusterSpec checks a request and returns its version with a "v" and
// its control-plane replicas with the default filled in.
func localClusterSpec(req apiclient.CreateLocalClusterRequest) (string, int32, error) {
	switch {
	case req.Name == "":
		return "", 0, invalid("name", "a local cluster needs a name, such as dev-1")
	case !localClusterName.MatchString(req.Name) || len(req.Name) > maxLocalClusterName:
		return "", 0, invalid("name", "cluster name %q: want at most %d lower-case letters, digits or '-', starting and ending with a letter or digit "+
			"(its machines are named <name>-control-plane-xxxxx, which must stay a DNS label)", req.Name, maxLocalClusterName)
	}
	pinned := kubebin.KubeVersions()
	version := strings.TrimPrefix(strings.TrimSpace(req.Version), "v")
	if !slices.Contains(pinned, version) {
		what := "which Kubernetes version?"
		if req.Version != "" {
			what = fmt.Sprintf("version %q is not pinned:", req.Version)
		}
		return "", 0, invalid("version", "%s give one of v%s", what, strings.Join(pinned, ", v"))
	}
	replicas := cmp.Or(req.ControlPlaneReplicas, MinLocalReplicas)
	switch {
	case replicas < MinLocalReplicas:
		return "", 0, invalid("controlPlaneReplicas", "%d control-plane machines: want at least %d, since Kubernetes upgrades replace one machine at a time "+
			"without a surplus one (maxSurge 0), which Cluster API allows from three machines on", replicas, MinLocalReplicas)
	case replicas > MaxLocalReplicas:
		return "", 0, invalid("controlPlaneReplicas", "%d control-plane machines: want at most %d, since each is a kube-apiserver process on this machine", replicas, MaxLocalReplicas)
	case req.WorkerReplicas < 0 || req.WorkerReplicas > MaxLocalWorkers:
		return "", 0, invalid("workerReplicas", "%d worker machines: want 0 to %d, since each is a node agent with its own sandbox network on this machine", req.WorkerReplicas, MaxLocalWorkers)
	}
	return "v" + version, replicas, nil
}

// createLocalCluster writes the objects of a new local cluster. Nothing is
// written unless every object would be admitted: the request is checked,
// then the names, then every object with a dry run; a create that still
// fails takes back those written before it.
func (s *Server) createLocalCluster(c echo.Context) error {
	if s.localFleet == nil {
		return errNoLocalFleet
	}
	var req apiclient.CreateLocalClusterRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	version, replicas, err := localClusterSpec(req)
	if err != nil {
		return err
	}
	if err := s.localFleetReady(c); err != nil {
		return err
	}
	ctx := c.Request().Context()
	// One creation at a time: each takes a free address block, which is
	// taken only once its LocalCluster is written.
	s.localMu.Lock()
	defer s.localMu.Unlock()
	objs, err := s.localClusterObjects(ctx, req.Name, version, replicas, req.WorkerReplicas)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := s.kube.Create(ctx, o.DeepCopyObject().(client.Object), client.DryRunAll); err != nil {
			return localCreateError(o, err)
		}
	}
	for i, o := range objs {
		if err := s.kube.Create(ctx, o); err != nil {
			for _, done := range slices.Backward(objs[:i]) {
				if derr := s.kube.Delete(context.WithoutCancel(ctx), done); derr != nil && !apierrors.IsNotFound(derr) {
					s.log.Error(derr, "Taking back a local cluster's object", "kind", kindOf(done), "name", done.GetName())
				}
			}
			return localCreateError(o, err)
		}
	}
	lc := objs[0].(*infrav1.LocalCluster)
	// The load balancer listens at .1 of the block.
	endpoint := netip.MustParsePrefix(lc.Spec.AddressBlock).Addr().Next()
	name := LocalClusterNamespace + "/" + req.Name
	s.audit(c, "fleet.create", name, map[string]any{"version": version, "controlPlaneReplicas": replicas,
		"workerReplicas": req.WorkerReplicas, "addressBlock": lc.Spec.AddressBlock})
	return c.JSON(http.StatusCreated, apiclient.LocalCluster{
		Name: name, Version: version, ControlPlaneReplicas: replicas, WorkerReplicas: req.WorkerReplicas, AddressBlock: lc.Spec.AddressBlock,
		Endpoint: netip.AddrPortFrom(endpoint, localfleet.APIServerPort).String(),
		Message: fmt.Sprintf("created: Cluster API makes its %d machines one after the other (a few minutes); "+
			"bex fleet list shows them as they become healthy", replicas+req.WorkerReplicas),
	})
}

// splitStreamsGate is the feature gate under which an apiserver serves a
// container's stdout and stderr apart (PodLogOptions.stream), alpha and
// off by default since Kubernetes 1.32.
const splitStreamsGate = "PodLogsQuerySplitStreams"

// localClusterObjects returns the objects of a new local cluster in a free
// address block; a name any of them has already is a 409.
func (s *Server) localClusterObjects(ctx context.Context, name, version string, replicas, workers int32) ([]client.Object, error) {
	var lcs infrav1.LocalClusterList
	if err := s.kube.List(ctx, &lcs); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, &httpError{status: http.StatusServiceUnavailable,
				message: fmt.Sprintf("the management cluster does not serve LocalClusters (%v): install deploy/localinfra-crds", err)}
		}
		return nil, fmt.Errorf("listing local clusters: %w", err)
	}
	block, err := localfleet.FreeBlock(localinfra.Blocks(lcs.Items))
	if err != nil {
		return nil, &httpError{status: http.StatusConflict, message: fmt.Sprintf("no address block for another local cluster: %v; delete one first", err)}
	}
	objs := localinfra.ClusterObjects(localinfra.ClusterOptions{
		Namespace: LocalClusterNamespace, Name: name, Version: version, ControlPlaneReplicas: replicas, WorkerReplicas: workers, Block: block,
		// The apiservers pass a log request's stream on to the nodes
		// (bex-node serves it), so that an app's stderr is told from
		// its stdout, as on the local runtime (docs/fleet.md).
		APIServerExtraArgs: []bootstrapv1.Arg{{Name: "feature-gates", Value: ptr.To(splitStreamsGate + "=true")}},
	})
	// The Cluster (created last) first: a name taken by a cluster is the
	// likelier, and says more.
	for _, o := range slices.Backward(objs) {
		existing := o.DeepCopyObject().(client.Object)
		err := s.kube.Get(ctx, client.ObjectKeyFromObject(o), existing)
		switch {
		case err == nil && kindOf(o) == "Cluster":
			return nil, &httpError{status: http.StatusConflict, field: "name",
				message: fmt.Sprintf("cluster %s/%s exists already: pick another name (bex fleet list shows the clusters)", LocalClusterNamespace, name)}
		case err == nil:
			return nil, &httpError{status: http.StatusConflict, field: "name",
				message: fmt.Sprintf("a %s %s/%s exists already, left from another cluster: pick another name, or delete it", kindOf(o), LocalClusterNamespace, o.GetName())}
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading %s %s: %w", kindOf(o), o.GetName(), err)
		}
	}
	return objs, nil
}

// localCreateError answers a refused create of o.
func localCreateError(o client.Object, err error) error {
	switch {
	case apierrors.IsAlreadyExists(err):
		return &httpError{status: http.StatusConflict, field: "name",
			message: fmt.Sprintf("%s %s/%s was created meanwhile: pick another name", kindOf(o), o.GetNamespace(), o.GetName())}
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
		return &httpError{status: http.StatusUnprocessableEntity, message: fmt.Sprintf("the cluster refused the %s: %v", kindOf(o), err)}
	}
	return fmt.Errorf("creating %s %s: %w", kindOf(o), o.GetName(), err)
}

// kindOf names o's Go type, which is its kind for the objects here.
func kindOf(o client.Object) string {
	t := fmt.Sprintf("%T", o)
	return t[strings.LastIndex(t, ".")+1:]
}

// deleteLocalCluster deletes a local cluster's Cluster; Cluster API then
// deletes its control plane and machines, and the local provider stops
// their processes and removes their files. Only clusters of the local
// fleet are deleted, and none a fleet upgrade is rolling: its rollout
// would fail midway.
func (s *Server) deleteLocalCluster(c echo.Context) error {
	if s.localFleet == nil {
		return errNoLocalFleet
	}
	ctx := c.Request().Context()
	name := c.Param("name")
	full := LocalClusterNamespace + "/" + name
	cl := &clusterv1.Cluster{}
	if err := s.kube.Get(ctx, types.NamespacedName{Namespace: LocalClusterNamespace, Name: name}, cl); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return notFound("no cluster %s: bex fleet list shows the clusters", full)
		}
		return fmt.Errorf("reading cluster %s: %w", full, err)
	}
	if ref := cl.Spec.InfrastructureRef; !infrav1.IsLocalCluster(ref) {
		return &httpError{status: http.StatusConflict, message: fmt.Sprintf("cluster %s is not a local cluster (its infrastructure is %s): "+
			"bex deletes only clusters of its local fleet; delete this one with its provider's tools (kubectl delete cluster)", full, cmp.Or(ref.Kind, "none"))}
	}
	lc := &infrav1.LocalCluster{}
	if err := s.kube.Get(ctx, types.NamespacedName{Namespace: LocalClusterNamespace, Name: cl.Spec.InfrastructureRef.Name}, lc); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading cluster %s's LocalCluster: %w", full, err)
	}
	if lc.Spec.Plane != "" {
		return &httpError{status: http.StatusConflict, message: fmt.Sprintf("cluster %s serves the platform's own control plane (its LocalCluster took plane %q over): "+
			"deleting it would stop the platform; upgrade it with bex upgrade, or stop make run", full, lc.Spec.Plane)}
	}
	if !cl.DeletionTimestamp.IsZero() {
		return c.JSON(http.StatusAccepted, apiclient.LocalClusterDeletion{Name: full, Message: "being deleted already: bex fleet list shows it until its machines are gone"})
	}
	if fu, err := s.upgradeRolling(ctx, full); err != nil {
		return err
	} else if fu != "" {
		return &httpError{status: http.StatusConflict, message: fmt.Sprintf("fleet upgrade %s is rolling cluster %s: wait until it is done (bex upgrade status %s), "+
			"or abort it (bex upgrade abort %s), then delete the cluster", fu, full, fu, fu)}
	}
	if err := s.localFleetReady(c); err != nil {
		return err
	}
	// A paused Cluster is not deleted by Cluster API: an aborted fleet
	// upgrade leaves its clusters so. Deleting it is the operator's call.
	unpaused := false
	if ptr.Deref(cl.Spec.Paused, false) {
		patch := client.MergeFromWithOptions(cl.DeepCopy(), client.MergeFromWithOptimisticLock{})
		cl.Spec.Paused = ptr.To(false)
		if err := s.kube.Patch(ctx, cl, patch); err != nil {
			return fmt.Errorf("unpausing cluster %s: %w", full, err)
		}
		unpaused = true
	}
	if err := s.kube.Delete(ctx, cl, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting cluster %s: %w", full, err)
	}
	s.audit(c, "fleet.delete", full, map[string]any{"unpaused": unpaused})
	msg := "deleting: Cluster API deletes its machines, then the local provider stops its processes and removes its files; bex fleet list shows it until it is gone"
	if unpaused {
		msg = "unpaused (it was paused, and Cluster API deletes no paused cluster) and " + msg
	}
	return c.JSON(http.StatusAccepted, apiclient.LocalClusterDeletion{Name: full, Unpaused: unpaused, Message: msg})
}

// upgradeRolling returns the name of a fleet upgrade, not finished, that
// has cluster (namespace/name) in its status and not done with it; "" when
// none has.
func (s *Server) upgradeRolling(ctx context.Context, cluster string) (string, error) {
	var fus fleetv1.FleetUpgradeList
	if err := s.kube.List(ctx, &fus); err != nil {
		if meta.IsNoMatchError(err) {
			return "", nil
		}
		return "", fmt.Errorf("listing fleet upgrades: %w", err)
	}
	for _, fu := range fus.Items {
		switch fu.Status.Phase {
		case fleetv1.FleetUpgradePhaseSucceeded, fleetv1.FleetUpgradePhaseFailed, fleetv1.FleetUpgradePhaseAborted:
			continue
		}
		for _, cs := range fu.Status.Clusters {
			if cs.Name != cluster {
				continue
			}
			switch cs.Phase {
			case fleetv1.ClusterUpgradePhaseSucceeded, fleetv1.ClusterUpgradePhaseFailed, fleetv1.ClusterUpgradePhaseAborted, fleetv1.ClusterUpgradePhaseSkipped:
			default:
				return fu.Name, nil
			}
		}
	}
	return "", nil
}
