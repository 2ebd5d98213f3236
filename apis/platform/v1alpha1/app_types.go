package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of an App. The App controller sets all four on every
// reconcile; Ready summarises the others.
const (
	// AppReadyCondition is True when the current release runs the requested
	// replicas of every process and they pass the health check.
	AppReadyCondition = "Ready"
	// AppBuiltCondition is True when the latest push was built into an image.
	AppBuiltCondition = "Built"
	// AppReleasedCondition is True when the latest build was recorded as a
	// release and rolled out.
	AppReleasedCondition = "Released"
	// AppPlacedCondition is True when the scheduler placed the App on a
	// workload cluster (status.cluster).
	AppPlacedCondition = "Placed"
)

// Reasons of the App conditions.
const (
	// AppAwaitingPushReason (Built=False, Ready=False): nothing was pushed to
	// the App's repository yet.
	AppAwaitingPushReason = "AwaitingPush"
	// AppBuildingReason (Built=False): a build of the latest push is running.
	AppBuildingReason = "Building"
	// AppBuildSucceededReason (Built=True): the latest push was built.
	AppBuildSucceededReason = "BuildSucceeded"
	// AppBuildFailedReason (Built=False): the latest build failed; the
	// previous release, if any, keeps running.
	AppBuildFailedReason = "BuildFailed"
	// AppRollingOutReason (Released=False): a release is being rolled out.
	AppRollingOutReason = "RollingOut"
	// AppRolledOutReason (Released=True): status.currentRelease is rolled out.
	AppRolledOutReason = "RolledOut"
	// AppRolloutFailedReason (Released=False): the new release never became
	// healthy and was rolled back.
	AppRolloutFailedReason = "RolloutFailed"
	// AppScheduledReason (Placed=True): the App has a placement.
	AppScheduledReason = "Scheduled"
	// AppUnschedulableReason (Placed=False): no workload cluster has room
	// for the App's plan; the message says why.
	AppUnschedulableReason = "Unschedulable"
	// AppHealthyReason (Ready=True): every replica passes its health check.
	AppHealthyReason = "Healthy"
	// AppUnhealthyReason (Ready=False): replicas fail their health check.
	AppUnhealthyReason = "Unhealthy"
	// AppSuspendedReason (Ready=False): spec.suspended is true and nothing runs.
	AppSuspendedReason = "Suspended"
	// AppInvalidSpecReason (any condition, False): the spec passed the API's
	// validation but cannot be acted on (for example a secretKeyRef to a
	// missing Secret); the message names the field.
	AppInvalidSpecReason = "InvalidSpec"
)

// AppFinalizer holds an App until what runs for it is stopped and its
// Placement removed. The App controller adds it to an App that lacks it;
// the platform's API sets it on the Apps it creates, which saves each new
// App that write.
const AppFinalizer = "platform.bex.co/runtime"

// Stack names a builder. When App.spec.build.stack is empty the builder
// detects it from the repository.
// +kubebuilder:validation:Enum=go;node;python;static;procfile;dockerfile
type Stack string

// The stacks a builder can build.
const (
	StackGo         Stack = "go"
	StackNode       Stack = "node"
	StackPython     Stack = "python"
	StackStatic     Stack = "static"
	StackProcfile   Stack = "procfile"
	StackDockerfile Stack = "dockerfile"
)

// Plan names a size of App: how much CPU and memory each replica gets.
// +kubebuilder:validation:Enum=starter;standard;pro
type Plan string

// The plans.
const (
	PlanStarter  Plan = "starter"
	PlanStandard Plan = "standard"
	PlanPro      Plan = "pro"
)

// App is a tenant's service: the code in one repository of the platform git
// server, built on every push and run as one or more processes. The namespace
// of an App is its tenant.
//
// The name becomes part of workload object names and of the default hostname,
// so it is a DNS label of at most 40 characters.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=bapp,categories=bex
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Release",type=integer,JSONPath=`.status.currentRelease`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 40 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label of at most 40 characters: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"
type App struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the tenant asks for. An App with an empty spec builds the
	// branch main of the repository named like the App.
	// +kubebuilder:default={}
	// +optional
	Spec AppSpec `json:"spec,omitempty"`

	// Status is what the App controller observed.
	// +optional
	Status AppStatus `json:"status,omitempty"`
}

// AppSpec is the desired state of an App.
type AppSpec struct {
	// Source says which branch of the App's repository in the platform git
	// server is built and released.
	// +kubebuilder:default={}
	// +optional
	Source AppSource `json:"source,omitempty"`

	// Build overrides what the builder detects.
	// +optional
	Build AppBuild `json:"build,omitempty"`

	// Processes lists the process types to run and their scale. When empty,
	// one web process runs the command the build detected. Names are unique,
	// so there is at most one web process.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Processes []Process `json:"processes,omitempty"`

	// Env is the environment of every process, in addition to PORT, which the
	// platform sets.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=500
	// +optional
	Env []EnvVar `json:"env,omitempty"`

	// HealthCheck is the HTTP check a new release must pass before it takes
	// traffic, and that keeps running while it does. Without one, a replica
	// is healthy once its port accepts connections.
	// +optional
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`

	// Plan sizes each replica.
	// +kubebuilder:default=starter
	// +optional
	Plan Plan `json:"plan,omitempty"`

	// Resources overrides the CPU and memory that the plan gives each
	// replica.
	// +optional
	Resources *Resources `json:"resources,omitempty"`

	// Suspended scales every process to zero without deleting anything;
	// routes answer 503 meanwhile.
	// +optional
	Suspended bool `json:"suspended,omitempty"`

	// MaintenancePage is the HTML page the edge answers a browser with, as
	// a 503, while the App is suspended: at most MaxMaintenancePage (65536)
	// bytes of UTF-8. The edge never fetches a page from a URL; it serves
	// this one under a Content-Security-Policy that runs no script and
	// loads nothing from elsewhere: inline styles and data: images only.
	// Empty: the edge's own page.
	// +kubebuilder:validation:MaxLength=65536
	// +kubebuilder:validation:XValidation:rule="size(bytes(self)) <= 65536",message="must be at most 65536 bytes of UTF-8"
	// +optional
	MaintenancePage string `json:"maintenancePage,omitempty"`
}

// MaxMaintenancePage is the most bytes AppSpec.MaintenancePage may hold.
const MaxMaintenancePage = 64 << 10

// AppSource is what of the App's repository is built. The repository is
// the App's own, named after it in the platform git server
// (<git>/<tenant>/<app>.git), as a Heroku app has its own git remote: to
// run one codebase as two apps (staging and production), push it to both.
type AppSource struct {
	// Branch is the branch whose pushes are built and released.
	// +kubebuilder:default=main
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][-a-zA-Z0-9._/]*$`
	// +optional
	Branch string `json:"branch,omitempty"`
}

// AppBuild overrides the builder's detection.
// +kubebuilder:validation:XValidation:rule="!has(self.dockerfile) || !has(self.stack) || self.stack == 'dockerfile'",message="may only be set when spec.build.stack is dockerfile or unset",fieldPath=".dockerfile"
type AppBuild struct {
	// Stack selects the builder instead of detecting it.
	// +optional
	Stack Stack `json:"stack,omitempty"`

	// Command replaces the stack's build command (for example "npm run
	// build"); it runs in a shell at the repository root.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Command string `json:"command,omitempty"`

	// Dockerfile is the path of the Dockerfile relative to the repository
	// root; the default is "Dockerfile". Setting it implies the dockerfile
	// stack.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(s, s == '..')",message="must be a path relative to the repository root, without '..'"
	// +optional
	Dockerfile string `json:"dockerfile,omitempty"`
}

// Process is one process type of an App and its scale.
type Process struct {
	// Name is the process type, such as web or worker. The web process
	// receives the App's HTTP traffic. Names are DNS labels of at most 22
	// characters so that "<app>-<process>" stays a DNS label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=22
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Command runs the process, in a shell. Empty means the command from the
	// Procfile or the one the stack detected.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Command string `json:"command,omitempty"`

	// Replicas is how many copies of the process run.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
}

// EnvVar is one environment variable: a literal value or a key of a Secret
// in the App's namespace, exactly one of the two.
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.secretKeyRef)",message="exactly one of value or secretKeyRef must be set"
type EnvVar struct {
	// Name is the variable's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`

	// Value is the literal value; it may be empty.
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Value *string `json:"value,omitempty"`

	// SecretKeyRef takes the value from a key of a Secret.
	// +optional
	SecretKeyRef *SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// SecretKeySelector names a key of a Secret in the App's namespace.
type SecretKeySelector struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key is the key in the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// HealthCheck is an HTTP GET that a replica must answer with a 2xx or 3xx.
type HealthCheck struct {
	// Path is the request path, such as /healthz.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must start with '/'"
	Path string `json:"path"`

	// Port is the port checked; the default is the process's PORT.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`

	// TimeoutSeconds is how long one check may take.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// IntervalSeconds is the time between two checks.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	// +optional
	IntervalSeconds int32 `json:"intervalSeconds,omitempty"`

	// SuccessThreshold is how many checks in a row must pass for an
	// unhealthy replica to count as healthy.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +optional
	SuccessThreshold int32 `json:"successThreshold,omitempty"`

	// FailureThreshold is how many checks in a row must fail for a healthy
	// replica to count as unhealthy.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +optional
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
}

// Resources overrides the CPU and memory of each replica.
type Resources struct {
	// CPU is the CPU of each replica, such as 500m or 2.
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).isGreaterThan(quantity('0'))",message="must be greater than zero"
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// Memory is the memory of each replica, such as 512Mi.
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).isGreaterThan(quantity('0'))",message="must be greater than zero"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// AppStatus is the observed state of an App.
type AppStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready, Built, Released and Placed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// CurrentRelease is the number of the release that serves traffic; 0
	// before the first release.
	// +optional
	CurrentRelease int64 `json:"currentRelease,omitempty"`

	// URL is the App's default HTTPS address.
	// +optional
	URL string `json:"url,omitempty"`

	// LatestBuild is the number of the App's newest build that ended, as
	// the build pipeline records it when a build ends; the Built condition
	// says how it ended.
	// +optional
	LatestBuild int64 `json:"latestBuild,omitempty"`

	// Cluster is the name of the workload cluster the App is placed on.
	// +optional
	Cluster string `json:"cluster,omitempty"`
}

// AppList is a list of Apps.
// +kubebuilder:object:root=true
type AppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []App `json:"items"`
}
