package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a FleetUpgrade, set on the FleetUpgrade and, where they
// apply, on each entry of status.clusters.
const (
	// FleetUpgradeReadyCondition is True when every selected cluster runs
	// the target version and passed verification.
	FleetUpgradeReadyCondition = "Ready"
	// FleetUpgradePreflightPassedCondition is True when the preflight checks
	// passed: version skew, MVP flags and feature gate on every apiserver,
	// peer certificates present, capacity for the rollout.
	FleetUpgradePreflightPassedCondition = "PreflightPassed"
	// FleetUpgradeProgressingCondition is True while a cluster is being
	// upgraded or soaked.
	FleetUpgradeProgressingCondition = "Progressing"
	// FleetUpgradePausedCondition is True while the rollout is paused, by
	// the operator (spec.paused) or by a gate.
	FleetUpgradePausedCondition = "Paused"
	// FleetUpgradeVerifiedCondition is True while the MVP verifier sees every
	// probe of every apiserver answered as expected.
	FleetUpgradeVerifiedCondition = "Verified"
)

// Reasons of the FleetUpgrade conditions.
const (
	// FleetUpgradeSucceededReason (Ready=True, Progressing=False): all
	// selected clusters are upgraded.
	FleetUpgradeSucceededReason = "Succeeded"
	// FleetUpgradeInProgressReason (Ready=False, Progressing=True): clusters
	// remain to be upgraded.
	FleetUpgradeInProgressReason = "InProgress"
	// FleetUpgradePendingReason (Progressing=False, on a cluster): the
	// cluster's turn has not come yet.
	FleetUpgradePendingReason = "Pending"
	// FleetUpgradeFailedReason (Ready=False): a cluster failed to upgrade;
	// the message names it.
	FleetUpgradeFailedReason = "Failed"
	// FleetUpgradeAbortedReason (Ready=False, Progressing=False):
	// spec.abort is true.
	FleetUpgradeAbortedReason = "Aborted"
	// FleetUpgradeSoakingReason (Progressing=True): a cluster is upgraded and
	// soaking before the next one starts.
	FleetUpgradeSoakingReason = "Soaking"
	// FleetUpgradePreflightSucceededReason (PreflightPassed=True).
	FleetUpgradePreflightSucceededReason = "PreflightSucceeded"
	// FleetUpgradeVersionSkewReason (PreflightPassed=False): a cluster does
	// not run spec.fromVersion or the minor below the target.
	FleetUpgradeVersionSkewReason = "VersionSkew"
	// FleetUpgradeMVPNotWiredReason (PreflightPassed=False): an apiserver
	// lacks the peer-proxy flags or feature gate, gates.requireWireMVP is
	// true and spec.wireMVP is false.
	FleetUpgradeMVPNotWiredReason = "MVPNotWired"
	// FleetUpgradePeerCertificatesMissingReason (PreflightPassed=False): the
	// peer CA or proxy client certificate is missing on a machine.
	FleetUpgradePeerCertificatesMissingReason = "PeerCertificatesMissing"
	// FleetUpgradeInsufficientCapacityReason (PreflightPassed=False): a
	// cluster cannot lose a control plane machine for the rollout.
	FleetUpgradeInsufficientCapacityReason = "InsufficientCapacity"
	// FleetUpgradeClusterUnreachableReason (PreflightPassed=False or
	// Verified=False): an apiserver of a cluster does not answer.
	FleetUpgradeClusterUnreachableReason = "ClusterUnreachable"
	// FleetUpgradePausedByOperatorReason (Paused=True): spec.paused is true.
	FleetUpgradePausedByOperatorReason = "PausedByOperator"
	// FleetUpgradeGateFailedReason (Paused=True): a gate stopped the
	// rollout; the message carries the evidence.
	FleetUpgradeGateFailedReason = "GateFailed"
	// FleetUpgradeLoadBalancerHandoffFailedReason (Paused=True,
	// Progressing=False): the Hetzner API refused or failed a control-plane
	// server's load-balancer hand-off; the message has the API's error. The
	// Machine keeps its pre-drain hook, so Cluster API does not delete it,
	// and the hand-off is retried with backoff.
	FleetUpgradeLoadBalancerHandoffFailedReason = "LoadBalancerHandoffFailed"
	// FleetUpgradeMVPVerifiedReason (Verified=True): every probe passed.
	FleetUpgradeMVPVerifiedReason = "MVPVerified"
	// FleetUpgradeSpurious404Reason (Verified=False): an apiserver answered
	// 404 for a resource that the fleet serves.
	FleetUpgradeSpurious404Reason = "Spurious404"
	// FleetUpgradeTenantPushLostReason (Verified=False): a tenant git push
	// failed during the rollout.
	FleetUpgradeTenantPushLostReason = "TenantPushLost"
	// FleetUpgradeDiscoveryMismatchReason (Verified=False): the peer-merged
	// discovery of two apiservers differs.
	FleetUpgradeDiscoveryMismatchReason = "DiscoveryMismatch"
	// FleetUpgradeProbeFailedReason (Verified=False): an apiserver answered
	// a probe with a 503 or an error, or the verifier found something wrong
	// besides the probes; the message carries the evidence.
	FleetUpgradeProbeFailedReason = "ProbeFailed"
	// FleetUpgradeAwaitingVerificationReason (Verified=Unknown): the
	// verifier has not run on the cluster yet.
	FleetUpgradeAwaitingVerificationReason = "AwaitingVerification"
)

// FleetUpgradePhase is where a FleetUpgrade stands.
// +kubebuilder:validation:Enum=Pending;Preflight;WiringMVP;Canary;Soaking;Rolling;Paused;Succeeded;Failed;Aborted
type FleetUpgradePhase string

// The FleetUpgrade phases.
const (
	FleetUpgradePhasePending   FleetUpgradePhase = "Pending"
	FleetUpgradePhasePreflight FleetUpgradePhase = "Preflight"
	FleetUpgradePhaseWiringMVP FleetUpgradePhase = "WiringMVP"
	FleetUpgradePhaseCanary    FleetUpgradePhase = "Canary"
	FleetUpgradePhaseSoaking   FleetUpgradePhase = "Soaking"
	FleetUpgradePhaseRolling   FleetUpgradePhase = "Rolling"
	FleetUpgradePhasePaused    FleetUpgradePhase = "Paused"
	FleetUpgradePhaseSucceeded FleetUpgradePhase = "Succeeded"
	FleetUpgradePhaseFailed    FleetUpgradePhase = "Failed"
	FleetUpgradePhaseAborted   FleetUpgradePhase = "Aborted"
)

// ClusterUpgradePhase is where the upgrade of one cluster stands.
// +kubebuilder:validation:Enum=Pending;Preflight;WiringMVP;Upgrading;Soaking;Paused;Succeeded;Failed;Aborted;Skipped
type ClusterUpgradePhase string

// The per-cluster phases.
const (
	ClusterUpgradePhasePending   ClusterUpgradePhase = "Pending"
	ClusterUpgradePhasePreflight ClusterUpgradePhase = "Preflight"
	ClusterUpgradePhaseWiringMVP ClusterUpgradePhase = "WiringMVP"
	ClusterUpgradePhaseUpgrading ClusterUpgradePhase = "Upgrading"
	ClusterUpgradePhaseSoaking   ClusterUpgradePhase = "Soaking"
	ClusterUpgradePhasePaused    ClusterUpgradePhase = "Paused"
	ClusterUpgradePhaseSucceeded ClusterUpgradePhase = "Succeeded"
	ClusterUpgradePhaseFailed    ClusterUpgradePhase = "Failed"
	ClusterUpgradePhaseAborted   ClusterUpgradePhase = "Aborted"
	// ClusterUpgradePhaseSkipped: the cluster already ran the target version.
	ClusterUpgradePhaseSkipped ClusterUpgradePhase = "Skipped"
)

// StepVerdict is the MVP verifier's judgement of one machine replacement.
// +kubebuilder:validation:Enum=Pending;Running;Passed;Failed
type StepVerdict string

// The step verdicts.
const (
	StepVerdictPending StepVerdict = "Pending"
	StepVerdictRunning StepVerdict = "Running"
	StepVerdictPassed  StepVerdict = "Passed"
	StepVerdictFailed  StepVerdict = "Failed"
)

// FleetUpgrade moves the selected workload clusters to the next Kubernetes
// minor version: preflight, optional wiring of the Mixed Version Proxy flags,
// the canary cluster, a soak, then the waves, one control plane machine at a
// time, with the MVP verifier probing every apiserver throughout.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fu,categories=bex
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetVersion`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FleetUpgrade struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the operator asks for.
	Spec FleetUpgradeSpec `json:"spec"`

	// Status is what the FleetUpgrade controller observed and did.
	// +optional
	Status FleetUpgradeStatus `json:"status,omitempty"`
}

// FleetUpgradeSpec is the desired state of a FleetUpgrade.
// +kubebuilder:validation:XValidation:rule="!has(self.fromVersion) || !self.fromVersion.matches('^v?1[.][0-9]+[.][0-9]+$') || !self.targetVersion.matches('^v?1[.][0-9]+[.][0-9]+$') || int(self.targetVersion.split('.')[1]) == int(self.fromVersion.split('.')[1]) + 1",message="must be exactly one minor version above spec.fromVersion: an upgrade that skips a minor version is refused",fieldPath=".targetVersion"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.abort) || !oldSelf.abort || (has(self.abort) && self.abort)",message="cannot go back to false once true: create a new FleetUpgrade instead",fieldPath=".abort"
type FleetUpgradeSpec struct {
	// TargetVersion is the Kubernetes version to upgrade to, such as
	// v1.37.2. It cannot change.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^v?1\.[0-9]+\.[0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cannot change: create a new FleetUpgrade for another version"
	TargetVersion string `json:"targetVersion"`

	// FromVersion is the version the fleet runs. When set, the target must
	// be the next minor version, and preflight refuses clusters that run
	// another version.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^v?1\.[0-9]+\.[0-9]+$`
	// +optional
	FromVersion string `json:"fromVersion,omitempty"`

	// ClusterSelector selects the Cluster API Clusters to upgrade, in every
	// namespace. An empty selector selects all of them.
	ClusterSelector metav1.LabelSelector `json:"clusterSelector"`

	// CanaryCluster is upgraded first, alone, and soaked before any wave
	// starts. It must match ClusterSelector.
	// +optional
	CanaryCluster *ClusterReference `json:"canaryCluster,omitempty"`

	// Waves are upgraded in order after the canary; each selects among the
	// clusters of ClusterSelector. Clusters that no wave selects form a last
	// wave. Without waves every selected cluster is in one wave.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Waves []Wave `json:"waves,omitempty"`

	// MaxParallelClusters caps the clusters upgraded at once, across waves.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	// +optional
	MaxParallelClusters int32 `json:"maxParallelClusters,omitempty"`

	// SoakTime is how long an upgraded cluster (the canary, then each wave)
	// must stay verified before the next one starts.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('-')",message="must not be negative"
	// +optional
	SoakTime *metav1.Duration `json:"soakTime,omitempty"`

	// Gates stop the rollout when verification fails.
	// +kubebuilder:default={}
	// +optional
	Gates UpgradeGates `json:"gates,omitempty"`

	// WireMVP sets the Mixed Version Proxy flags (and the feature gate where
	// it is off) on the control planes in a rollout before the version bump.
	// +optional
	WireMVP bool `json:"wireMVP,omitempty"`

	// Paused stops the rollout after the current machine: Cluster API is
	// paused on the clusters being upgraded.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Abort stops the rollout for good; clusters not yet started are left
	// alone. Once true it cannot be set back to false.
	// +optional
	Abort bool `json:"abort,omitempty"`
}

// ClusterReference names a Cluster API Cluster.
type ClusterReference struct {
	// Namespace is the Cluster's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// Name is the Cluster's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
}

// Wave is a group of clusters upgraded together, after the previous wave
// soaked.
type Wave struct {
	// Name identifies the wave in the status and the console.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// MaxParallel caps the clusters of this wave upgraded at once; the
	// spec's maxParallelClusters still applies.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	// +optional
	MaxParallel int32 `json:"maxParallel,omitempty"`

	// ClusterSelector selects the wave's clusters among those of the spec's
	// clusterSelector.
	ClusterSelector metav1.LabelSelector `json:"clusterSelector"`
}

// UpgradeGates are the checks that pause a rollout.
type UpgradeGates struct {
	// MVPVerified requires the MVP verifier to pass on a cluster after every
	// machine replacement before the next one starts.
	// +kubebuilder:default=true
	// +optional
	MVPVerified *bool `json:"mvpVerified,omitempty"`

	// MaxSpurious404 is how many spurious 404s the verifier tolerates per
	// cluster before it pauses the rollout.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxSpurious404 int32 `json:"maxSpurious404,omitempty"`

	// RequireWireMVP fails preflight on a cluster whose apiservers do not
	// run the Mixed Version Proxy, unless spec.wireMVP wires it first.
	// +optional
	RequireWireMVP bool `json:"requireWireMVP,omitempty"`
}

// FleetUpgradeStatus is the observed state of a FleetUpgrade.
type FleetUpgradeStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase is where the FleetUpgrade stands.
	// +optional
	Phase FleetUpgradePhase `json:"phase,omitempty"`

	// Conditions are Ready, PreflightPassed, Progressing, Paused and
	// Verified.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Clusters is the state of each selected cluster.
	// +listType=map
	// +listMapKey=name
	// +optional
	Clusters []ClusterUpgradeStatus `json:"clusters,omitempty"`
}

// ClusterUpgradeStatus is the upgrade state of one cluster.
type ClusterUpgradeStatus struct {
	// Name is the Cluster's "namespace/name".
	Name string `json:"name"`

	// Wave is the wave the cluster belongs to, or "canary".
	// +optional
	Wave string `json:"wave,omitempty"`

	// Phase is where the cluster's upgrade stands.
	// +optional
	Phase ClusterUpgradePhase `json:"phase,omitempty"`

	// FromVersion is the version the cluster ran when the upgrade started.
	// +optional
	FromVersion string `json:"fromVersion,omitempty"`

	// ToVersion is the version the cluster is upgraded to.
	// +optional
	ToVersion string `json:"toVersion,omitempty"`

	// Steps records each control plane machine replacement, in order.
	// +listType=atomic
	// +optional
	Steps []UpgradeStep `json:"steps,omitempty"`

	// StartedAt is when the controller started on the cluster (its
	// preflight).
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// FinishedAt is when the cluster's last machine was verified; the soak
	// of its stage runs from the last FinishedAt of the stage.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`

	// LastVerification is the MVP verifier's latest verdict on the cluster.
	// +optional
	LastVerification *Verification `json:"lastVerification,omitempty"`

	// Conditions are PreflightPassed, Progressing, Paused and Verified for
	// this cluster.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Verification is one run of the MVP verifier against every apiserver of a
// cluster.
type Verification struct {
	// Time is when the verifier ran.
	Time metav1.Time `json:"time"`

	// Passed is true when the gate let the rollout go on.
	Passed bool `json:"passed"`

	// Reason is the Verified condition's reason it led to: MVPVerified,
	// Spurious404, ProbeFailed or ClusterUnreachable.
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`

	// Message is the verdict, with the evidence (apiserver, resource,
	// status, answer) when it failed.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Message string `json:"message,omitempty"`

	// APIServers are the names of the apiservers probed.
	// +listType=atomic
	// +optional
	APIServers []string `json:"apiservers,omitempty"`
}

// UpgradeStep is the replacement of one control plane machine and the
// verifier's verdict on it.
type UpgradeStep struct {
	// Machine is the name of the Cluster API Machine replaced.
	Machine string `json:"machine"`

	// OldVersion is the Kubernetes version of the machine replaced.
	// +optional
	OldVersion string `json:"oldVersion,omitempty"`

	// NewVersion is the Kubernetes version of its replacement.
	// +optional
	NewVersion string `json:"newVersion,omitempty"`

	// StartedAt is when the machine started to be replaced.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// FinishedAt is when the replacement joined and was verified, or failed.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`

	// Verdict is the verifier's judgement of the step.
	// +optional
	Verdict StepVerdict `json:"verdict,omitempty"`

	// Message explains the verdict, with the evidence when it failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// FleetUpgradeList is a list of FleetUpgrades.
// +kubebuilder:object:root=true
type FleetUpgradeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetUpgrade `json:"items"`
}
