package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// UpgradePlanRequest is the body of POST /api/v1/upgrades/plan: the part of
// a FleetUpgrade's spec that decides the plan.
type UpgradePlanRequest struct {
	// TargetVersion is the Kubernetes version to upgrade to, such as
	// v1.37.2.
	TargetVersion string `json:"targetVersion"`
	// FromVersion, when set, is the version the fleet runs: the target must
	// be the next minor version, and clusters on another minor are refused.
	FromVersion string `json:"fromVersion,omitempty"`
	// ClusterSelector selects Cluster API Clusters by label, in kubectl's
	// syntax ("env=prod,tier!=db"); empty selects every cluster.
	ClusterSelector string `json:"clusterSelector,omitempty"`
	// CanaryCluster is "namespace/name" of the cluster upgraded first,
	// alone.
	CanaryCluster string `json:"canaryCluster,omitempty"`
	// Waves are upgraded in order after the canary.
	Waves []UpgradeWave `json:"waves,omitempty"`
	// MaxParallelClusters caps the clusters upgraded at once (default 1).
	MaxParallelClusters int32 `json:"maxParallelClusters,omitempty"`
}

// UpgradeWave is a wave of a fleet upgrade.
type UpgradeWave struct {
	// Name is a DNS label.
	Name string `json:"name"`
	// ClusterSelector selects the wave's clusters among the upgrade's, in
	// kubectl's syntax.
	ClusterSelector string `json:"clusterSelector"`
	// MaxParallel caps the wave's clusters upgraded at once (default 1).
	MaxParallel int32 `json:"maxParallel,omitempty"`
}

// CreateUpgradeRequest is the body of POST /api/v1/upgrades: a
// FleetUpgrade's name and spec.
type CreateUpgradeRequest struct {
	// Name is the FleetUpgrade's name, a DNS subdomain.
	Name                string        `json:"name"`
	TargetVersion       string        `json:"targetVersion"`
	FromVersion         string        `json:"fromVersion,omitempty"`
	ClusterSelector     string        `json:"clusterSelector,omitempty"`
	CanaryCluster       string        `json:"canaryCluster,omitempty"`
	Waves               []UpgradeWave `json:"waves,omitempty"`
	MaxParallelClusters int32         `json:"maxParallelClusters,omitempty"`
	// Soak is how long each stage stays verified before the next starts,
	// as a Go duration ("10m", the default).
	Soak string `json:"soak,omitempty"`
	// WireMVP sets the Mixed Version Proxy flags on control planes that
	// lack them, in a rollout before the version bump.
	WireMVP bool `json:"wireMVP,omitempty"`
}

// UpgradePlan answers POST /api/v1/upgrades/plan: what a FleetUpgrade with
// that spec would do to the fleet as it is now.
type UpgradePlan struct {
	// TargetVersion is the target, with a leading "v".
	TargetVersion string `json:"targetVersion"`
	// Stages run one after the other.
	Stages []UpgradeStage `json:"stages"`
	// Skipped are selected clusters that run the target already.
	Skipped []UpgradeDecision `json:"skipped"`
	// Refused are selected clusters the upgrade cannot take. A FleetUpgrade
	// does not start while any is refused.
	Refused []UpgradeDecision `json:"refused"`
}

// UpgradeStage is a group of clusters upgraded together.
type UpgradeStage struct {
	// Name is "canary", a wave's name, "(remaining)" or "(management)".
	Name string `json:"name"`
	// Kind is Canary, Wave, Remaining or Management.
	Kind string `json:"kind"`
	// MaxParallel is how many of its clusters are upgraded at once.
	MaxParallel int32            `json:"maxParallel"`
	Clusters    []PlannedCluster `json:"clusters"`
}

// PlannedCluster is a cluster the plan upgrades.
type PlannedCluster struct {
	// Name is the Cluster's "namespace/name".
	Name string `json:"name"`
	// ControlPlane is its KubeadmControlPlane's "namespace/name".
	ControlPlane string `json:"controlPlane"`
	// FromVersion is the lowest version its control plane runs now.
	FromVersion string `json:"fromVersion"`
	ToVersion   string `json:"toVersion"`
	// Management is true for the management cluster, always last.
	Management bool `json:"management,omitempty"`
}

// UpgradeDecision is a selected cluster the plan does not upgrade, and
// why.
type UpgradeDecision struct {
	// Cluster is the Cluster's "namespace/name".
	Cluster string `json:"cluster"`
	// Version is what its control plane runs, when known.
	Version string `json:"version,omitempty"`
	// Decision is "skipped" or "refused".
	Decision string `json:"decision"`
	// Reason is AlreadyAtTarget, TooFarBehind, AheadOfTarget,
	// NotFromVersion, NoKubeadmControlPlane or UnknownVersion.
	Reason string `json:"reason"`
	// Message says what to do.
	Message string `json:"message"`
}

// Upgrade is a FleetUpgrade: its spec, what the controller reports and,
// on GET /api/v1/upgrades/{name}, what Postgres recorded of its run.
type Upgrade struct {
	Name                string        `json:"name"`
	TargetVersion       string        `json:"targetVersion"`
	FromVersion         string        `json:"fromVersion,omitempty"`
	ClusterSelector     string        `json:"clusterSelector,omitempty"`
	CanaryCluster       string        `json:"canaryCluster,omitempty"`
	Waves               []UpgradeWave `json:"waves,omitempty"`
	MaxParallelClusters int32         `json:"maxParallelClusters"`
	Soak                string        `json:"soak"`
	WireMVP             bool          `json:"wireMVP"`
	// Paused is spec.paused: the operator holds the rollout.
	Paused bool `json:"paused"`
	// Aborted is spec.abort: the rollout is stopped for good.
	Aborted bool `json:"aborted"`
	// Phase is the controller's phase (Pending, Preflight, WiringMVP,
	// Canary, Soaking, Rolling, Paused, Succeeded, Failed, Aborted); empty
	// until the controller has looked at the FleetUpgrade.
	Phase      string             `json:"phase,omitempty"`
	Conditions []UpgradeCondition `json:"conditions"`
	// Clusters are the controller's per-cluster status, in plan order.
	Clusters []UpgradeClusterStatus `json:"clusters"`
	// Run is the run recorded in Postgres: its state on every view, its
	// steps on GET /api/v1/upgrades/{name}. Absent before the controller
	// recorded anything.
	Run       *UpgradeRun `json:"run,omitempty"`
	CreatedAt time.Time   `json:"createdAt"`
}

// UpgradeCondition is one condition of a FleetUpgrade or of one of its
// clusters.
type UpgradeCondition struct {
	Type    string    `json:"type"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason"`
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since"`
}

// UpgradeClusterStatus is the upgrade of one cluster, as the controller
// reports it.
type UpgradeClusterStatus struct {
	// Name is the Cluster's "namespace/name".
	Name string `json:"name"`
	// Wave is the stage it belongs to ("canary", a wave, "(remaining)").
	Wave        string `json:"wave,omitempty"`
	Phase       string `json:"phase,omitempty"`
	FromVersion string `json:"fromVersion,omitempty"`
	ToVersion   string `json:"toVersion,omitempty"`
	// Steps are its control-plane machine replacements, in order.
	Steps            []UpgradeMachineStep `json:"steps"`
	StartedAt        *time.Time           `json:"startedAt,omitempty"`
	FinishedAt       *time.Time           `json:"finishedAt,omitempty"`
	LastVerification *UpgradeVerification `json:"lastVerification,omitempty"`
	Conditions       []UpgradeCondition   `json:"conditions"`
}

// UpgradeMachineStep is the replacement of one control-plane machine and
// the verifier's verdict on it.
type UpgradeMachineStep struct {
	Machine    string     `json:"machine"`
	OldVersion string     `json:"oldVersion,omitempty"`
	NewVersion string     `json:"newVersion,omitempty"`
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// Verdict is Pending, Running, Passed or Failed.
	Verdict string `json:"verdict,omitempty"`
	Message string `json:"message,omitempty"`
}

// UpgradeVerification is the MVP verifier's latest verdict on a cluster.
type UpgradeVerification struct {
	Time   time.Time `json:"time"`
	Passed bool      `json:"passed"`
	// Reason is MVPVerified, Spurious404, ProbeFailed or
	// ClusterUnreachable.
	Reason string `json:"reason"`
	// Message is the verdict, with the evidence (apiserver, resource,
	// status, answer) when it failed.
	Message    string   `json:"message,omitempty"`
	APIServers []string `json:"apiservers,omitempty"`
}

// UpgradeRun is a FleetUpgrade's run as recorded in Postgres.
type UpgradeRun struct {
	ID string `json:"id"`
	// State is running, paused, succeeded, failed or aborted.
	State      string     `json:"state"`
	Message    string     `json:"message,omitempty"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// Steps are the recorded steps in order; only on GET
	// /api/v1/upgrades/{name}.
	Steps []UpgradeRecordedStep `json:"steps,omitempty"`
}

// UpgradeRecordedStep is one recorded step: preflight, wire-mvp, bump,
// machine, verify, soak, lb-handoff or release.
type UpgradeRecordedStep struct {
	Seq         int    `json:"seq"`
	Cluster     string `json:"cluster"`
	Kind        string `json:"kind"`
	Machine     string `json:"machine,omitempty"`
	FromVersion string `json:"fromVersion,omitempty"`
	ToVersion   string `json:"toVersion,omitempty"`
	// Outcome is running, passed, failed or paused.
	Outcome    string     `json:"outcome"`
	Message    string     `json:"message,omitempty"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// Probes counts the step's probe samples by outcome (ServedLocally,
	// Proxied, Spurious404, Honest503, Error).
	Probes map[string]int `json:"probes,omitempty"`
	// ProbesByAPIServer counts them per apiserver, then by outcome.
	ProbesByAPIServer map[string]map[string]int `json:"probesByAPIServer,omitempty"`
	// FailedProbes are the samples that failed (Spurious404, Honest503,
	// Error), with ?probes=true.
	FailedProbes []UpgradeProbe `json:"failedProbes,omitempty"`
}

// UpgradeProbe is one recorded verifier probe.
type UpgradeProbe struct {
	APIServer string `json:"apiserver"`
	Resource  string `json:"resource"`
	Verb      string `json:"verb"`
	Status    int    `json:"status"`
	Outcome   string `json:"outcome"`
	// Message is the server's answer (trimmed), or the error of a request
	// that got none.
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// UpgradeChange answers pause, resume and abort.
type UpgradeChange struct {
	Upgrade Upgrade `json:"upgrade"`
	// Changed is false when the FleetUpgrade was so already.
	Changed bool `json:"changed"`
	// Message says what happens now.
	Message string `json:"message"`
}

// PlanUpgrade computes what a FleetUpgrade would do, without creating one
// (operator tokens only).
func (c *Client) PlanUpgrade(ctx context.Context, req UpgradePlanRequest) (UpgradePlan, error) {
	var p UpgradePlan
	return p, c.call(ctx, http.MethodPost, "/upgrades/plan", nil, req, &p)
}

// CreateUpgrade creates a FleetUpgrade (operator tokens only).
func (c *Client) CreateUpgrade(ctx context.Context, req CreateUpgradeRequest) (Upgrade, error) {
	var u Upgrade
	return u, c.call(ctx, http.MethodPost, "/upgrades", nil, req, &u)
}

// ListUpgrades lists the FleetUpgrades, newest first (operator tokens
// only).
func (c *Client) ListUpgrades(ctx context.Context) ([]Upgrade, error) {
	var us []Upgrade
	return us, c.call(ctx, http.MethodGet, "/upgrades", nil, nil, &us)
}

// GetUpgrade returns a FleetUpgrade with its recorded steps; with probes,
// the samples of failed probes too (operator tokens only).
func (c *Client) GetUpgrade(ctx context.Context, name string, probes bool) (Upgrade, error) {
	var u Upgrade
	q := url.Values{}
	if probes {
		q.Set("probes", "true")
	}
	return u, c.call(ctx, http.MethodGet, "/upgrades/"+seg(name), q, nil, &u)
}

// PauseUpgrade sets spec.paused of a FleetUpgrade (operator tokens only).
func (c *Client) PauseUpgrade(ctx context.Context, name string) (UpgradeChange, error) {
	return c.changeUpgrade(ctx, name, "pause")
}

// ResumeUpgrade clears spec.paused of a FleetUpgrade; an aborted one
// answers 409 (operator tokens only).
func (c *Client) ResumeUpgrade(ctx context.Context, name string) (UpgradeChange, error) {
	return c.changeUpgrade(ctx, name, "resume")
}

// AbortUpgrade sets spec.abort of a FleetUpgrade, which cannot be undone
// (operator tokens only).
func (c *Client) AbortUpgrade(ctx context.Context, name string) (UpgradeChange, error) {
	return c.changeUpgrade(ctx, name, "abort")
}

func (c *Client) changeUpgrade(ctx context.Context, name, action string) (UpgradeChange, error) {
	var ch UpgradeChange
	return ch, c.call(ctx, http.MethodPost, "/upgrades/"+seg(name)+"/"+action, nil, nil, &ch)
}

// FleetCluster is a Cluster API cluster of the fleet: its control plane's
// machines, its workers, and whether its apiservers run the Mixed Version
// Proxy.
type FleetCluster struct {
	// Name is the Cluster's "namespace/name".
	Name string `json:"name"`
	// ControlPlane is its KubeadmControlPlane's "namespace/name"; empty
	// when it has none.
	ControlPlane string `json:"controlPlane,omitempty"`
	// Version is the control plane's desired Kubernetes version.
	Version  string `json:"version,omitempty"`
	Replicas int32  `json:"replicas,omitempty"`
	// MaxSurge is the control plane's rollout maxSurge (0 or 1).
	MaxSurge string `json:"maxSurge,omitempty"`
	// Paused is the Cluster's spec.paused: Cluster API holds its rollout.
	Paused bool `json:"paused"`
	// Management is true for the management cluster.
	Management bool `json:"management,omitempty"`
	// Infrastructure is the kind of its infrastructure, such as
	// HCloudCluster, or LocalCluster for a cluster of the local fleet.
	Infrastructure string `json:"infrastructure,omitempty"`
	// Deleting is true once the Cluster is being deleted.
	Deleting bool `json:"deleting,omitempty"`
	// Cordoned is true when the Cluster has the annotation
	// scheduling.bex.co/cordoned=true (bex fleet cordon): the scheduler
	// places no app on it, and moves those it runs.
	Cordoned bool `json:"cordoned"`
	// Machines are the control plane's machines, oldest first.
	Machines []FleetMachine `json:"machines"`
	// WorkerReplicas is how many worker machines its MachineDeployments
	// want, and Workers are their machines, oldest first.
	WorkerReplicas int32          `json:"workerReplicas"`
	Workers        []FleetMachine `json:"workers"`
	MVP            FleetMVP       `json:"mvp"`
}

// FleetMachine is one machine: of the control plane, or a worker.
type FleetMachine struct {
	Name    string `json:"name"`
	Node    string `json:"node,omitempty"`
	Version string `json:"version"`
	// Address is its InternalIP (where the verifier reaches a
	// control-plane machine's apiserver).
	Address string `json:"address,omitempty"`
	// Healthy is true when its apiserver pod is healthy (a control-plane
	// machine) or its Node is ready (a worker).
	Healthy   bool      `json:"healthy"`
	Deleting  bool      `json:"deleting,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// FleetMVP says whether a control plane's apiserver flags run the Mixed
// Version Proxy on the version it runs now, from the upgrade preflight.
type FleetMVP struct {
	Wired bool `json:"wired"`
	// Findings are the preflight's wiring, gate and peer-address findings.
	Findings []FleetFinding `json:"findings,omitempty"`
}

// FleetFinding is one preflight finding.
type FleetFinding struct {
	Reason string `json:"reason"`
	// Severity is Blocker or Warning.
	Severity string `json:"severity,omitempty"`
	// Message says what is wrong and what to do.
	Message string `json:"message"`
	// FixedByWireMVP is true when an upgrade's wire-MVP step fixes it.
	FixedByWireMVP bool `json:"fixedByWireMVP,omitempty"`
}

// ListFleet lists the fleet's clusters (operator tokens only).
func (c *Client) ListFleet(ctx context.Context) ([]FleetCluster, error) {
	var out []FleetCluster
	return out, c.call(ctx, http.MethodGet, "/fleet", nil, nil, &out)
}
