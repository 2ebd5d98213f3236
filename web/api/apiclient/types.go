package apiclient

import (
	"encoding/json"
	"time"
)

// ErrorBody is the JSON body of every error answer.
type ErrorBody struct {
	Message string `json:"message"`
	// Field names the input at fault, for bad input ("name", "set.FOO").
	Field string `json:"field,omitempty"`
	// Quota names the tenant's quota that refused the request (apps,
	// routes), with 403.
	Quota string `json:"quota,omitempty"`
	// Role names the tenant role the request needs (viewer, developer,
	// admin), with 403 to a token that acts with less.
	Role string `json:"role,omitempty"`
	// Conflicts are, with 409 to a quota patch that expected them, the
	// quotas whose overrides were changed meanwhile.
	Conflicts []QuotaConflict `json:"conflicts,omitempty"`
}

// QuotaConflict is a quota whose override is not the one a patch
// expected (QuotaExpectKey).
type QuotaConflict struct {
	// Quota is the quota's key (apps, cpu, memory...).
	Quota string `json:"quota"`
	// Expected is the override the patch expected, Current the one the
	// tenant has: cpu in millicores, repoBytes and memory in bytes, null
	// for none (the platform's default).
	Expected *int64 `json:"expected"`
	Current  *int64 `json:"current"`
}

// WhoAmI says whom a token acts for.
type WhoAmI struct {
	// Tenant is the tenant's name; empty for an operator's token.
	Tenant string `json:"tenant,omitempty"`
	// Operator is true for an operator's token.
	Operator bool `json:"operator"`
	// Token is the token's name.
	Token string `json:"token"`
	// Email is the member who owns the token; empty for a tenant's
	// machine token.
	Email string `json:"email,omitempty"`
	// Role is the tenant role the token acts with (viewer, developer,
	// admin): its member's, or admin for a machine token, narrowed by its
	// scope. Empty for an operator's token.
	Role string `json:"role,omitempty"`
	// Scope is the token's scope: read, write or full.
	Scope string `json:"scope"`
}

// CreateSessionRequest is the body of POST /api/v1/sessions.
type CreateSessionRequest struct {
	// TTLSeconds is how long the session lasts; 0 means 12 hours, at most
	// 7 days.
	TTLSeconds int64 `json:"ttlSeconds,omitempty"`
}

// Session answers POST /api/v1/sessions: a token of its own that acts as
// the caller's does, under its name, until ExpiresAt, until it is ended (DELETE
// /api/v1/sessions/current), or until the caller's token is revoked.
type Session struct {
	// Token is the session token's secret, answered once.
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Tenant is the tenant's name; empty for an operator's session.
	Tenant string `json:"tenant,omitempty"`
	// Operator is true for an operator's session.
	Operator bool `json:"operator"`
	// Role is the tenant role the session acts with, as WhoAmI's.
	Role string `json:"role,omitempty"`
}

// CreateTenantRequest is the body of POST /api/v1/admin/tenants.
type CreateTenantRequest struct {
	Name string `json:"name"`
}

// Tenant is a tenant, as operators see it.
type Tenant struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

// CreatedTenant answers POST /api/v1/admin/tenants: the tenant and the
// secret of its first API token, shown this once.
type CreatedTenant struct {
	Tenant Tenant `json:"tenant"`
	Token  string `json:"token"`
}

// CreateAppRequest is the body of POST /api/v1/apps.
type CreateAppRequest struct {
	// Name is a DNS label of at most 40 characters that starts with a
	// letter.
	Name string `json:"name"`
	// Branch is the branch whose pushes deploy; default main.
	Branch string `json:"branch,omitempty"`
}

// App is a tenant's app.
type App struct {
	Name   string `json:"name"`
	Tenant string `json:"tenant"`
	// Branch is the branch whose pushes deploy.
	Branch string `json:"branch"`
	// GitRemote is the URL to add as a git remote and push to.
	GitRemote string `json:"gitRemote"`
	// URL is where the app answers.
	URL string `json:"url"`
	// CurrentRelease is the release that serves traffic; 0 before the first.
	CurrentRelease int64 `json:"currentRelease"`
	// Status is the App's Ready condition in a word: "ready", "not ready",
	// "pending" (no condition yet), with the condition's message in
	// StatusMessage.
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	// Placed is the App's Placed condition in a word: "placed", "not
	// placed" (no workload cluster can take the app), "pending" (the
	// scheduler has not looked yet), with the condition's message, where
	// and why, in Placement.
	Placed    string `json:"placed"`
	Placement string `json:"placement,omitempty"`
	// Cluster is the workload cluster the app is placed on and runs on:
	// "local" is the platform's own process runtime, any other name a
	// Cluster API cluster of the fleet. A cluster that went away can stay
	// named here while Placed is "not placed".
	Cluster   string    `json:"cluster,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Plan is the plan each instance runs on: starter, standard or pro.
	Plan string `json:"plan"`
	// Processes are the instance counts the App's spec sets, by process
	// type; a process it does not name runs the default (web 1, others 0).
	Processes map[string]int `json:"processes,omitempty"`
	// HealthCheck is the App's health check; none: an instance is healthy
	// once its port accepts connections.
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
	// Maintenance is true while the app is in maintenance mode
	// (spec.suspended): nothing runs, and the edge answers 503 with a page
	// that says so.
	Maintenance bool `json:"maintenance"`
	// MaintenancePageBytes is the size of the app's own maintenance page;
	// 0: the edge's page is served.
	MaintenancePageBytes int `json:"maintenancePageBytes,omitempty"`
	// MaintenancePage is the app's own maintenance page, in GET
	// /api/v1/apps/{app} and the answer of PATCH; a list of apps gives
	// its size only.
	MaintenancePage string `json:"maintenancePage,omitempty"`
}

// HealthCheck is an app's HTTP health check: a GET of Path that an
// instance answers with a 2xx or 3xx.
type HealthCheck struct {
	// Path is the request path, such as /healthz: at most 1024 bytes,
	// starting with '/'. An update leaves it out to keep the app's.
	Path string `json:"path,omitempty"`
	// Port is the port checked, 1 to 65535; 0: the process's PORT.
	Port int `json:"port,omitempty"`
	// TimeoutSeconds is how long one check may take, 1 to 60 (default 5).
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// IntervalSeconds is the time between two checks, 1 to 300 (default
	// 10).
	IntervalSeconds int `json:"intervalSeconds,omitempty"`
	// SuccessThreshold is how many checks in a row an unhealthy instance
	// must pass to count as healthy, 1 to 10 (default 1).
	SuccessThreshold int `json:"successThreshold,omitempty"`
	// FailureThreshold is how many checks in a row a healthy instance must
	// fail to count as unhealthy, 1 to 10 (default 3).
	FailureThreshold int `json:"failureThreshold,omitempty"`
}

// MaxMaintenancePage is the most bytes an app's maintenance page may hold.
const MaxMaintenancePage = 64 << 10

// UpdateAppRequest is the body of PATCH /api/v1/apps/{app}: the settings
// to change, at least one; those left out keep theirs. A field the API
// does not know is refused (422 naming it).
type UpdateAppRequest struct {
	// HealthCheck changes the fields of the health check it gives (an
	// app without one needs a path); JSON null removes the check.
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
	// Processes maps process types to instance counts, 0 to
	// MaxInstancesPerProcess, as a scale.
	Processes map[string]int `json:"processes,omitempty"`
	// Plan is starter, standard or pro.
	Plan string `json:"plan,omitempty"`
	// Branch is the branch whose pushes deploy: a git branch name of at
	// most 255 bytes.
	Branch string `json:"branch,omitempty"`
	// Maintenance turns maintenance mode on (every instance stops, the
	// release stays, the edge answers 503 with a maintenance page) or off
	// (the current release runs again).
	Maintenance *bool `json:"maintenance,omitempty"`
	// MaintenancePage sets the HTML page a browser gets, with 503, while
	// the app is in maintenance mode: at most MaxMaintenancePage bytes of
	// UTF-8, served as it is under a Content-Security-Policy that allows
	// no script and nothing loaded from elsewhere (inline styles and data:
	// images only). An empty string removes it: the edge's page is served.
	MaintenancePage *string `json:"maintenancePage,omitempty"`
	// RemoveHealthCheck sends healthCheck as null, which removes the
	// app's health check; HealthCheck must be nil then.
	RemoveHealthCheck bool `json:"-"`
}

// MarshalJSON writes the request, with "healthCheck": null when
// RemoveHealthCheck is set.
func (r UpdateAppRequest) MarshalJSON() ([]byte, error) {
	type fields UpdateAppRequest
	b, err := json.Marshal(fields(r))
	if err != nil || !r.RemoveHealthCheck {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["healthCheck"] = json.RawMessage("null")
	return json.Marshal(m)
}

// RunsOn says in a word where the app runs, as the CLI and the dashboard
// show it next to Placement: its cluster, "none" when no workload cluster
// can take it, or "pending" before the scheduler placed it.
func (a App) RunsOn() string {
	switch {
	case a.Placed == "not placed":
		return "none"
	case a.Cluster == "":
		return "pending"
	}
	return a.Cluster
}

// Build is one build of an app.
type Build struct {
	App    string `json:"app"`
	Number int    `json:"number"`
	Commit string `json:"commit,omitempty"`
	// Status is running, succeeded or failed.
	Status     string     `json:"status"`
	Stack      string     `json:"stack,omitempty"`
	Image      string     `json:"image,omitempty"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// Timings are the push's steps (the git receiver's auth, receive,
	// store and refs, then prepare, checkout, app build, image, registry
	// push, unpack, start, health check, switch, …) and their seconds, in
	// the order they ran; set once the build has finished.
	Timings []StepTime `json:"timings,omitempty"`
}

// StepTime is one step of a push and the seconds it took.
type StepTime struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// Release is one release of an app. Its configuration is not shown: the
// app's env says what it is now.
type Release struct {
	Number int `json:"number"`
	// Kind says what made the release, one of the ReleaseKind constants:
	// deploy (a push), rollback, or config (an environment change).
	// Programs read it, not Description.
	Kind string `json:"kind" enum:"deploy,rollback,config"`
	// RollbackTo is, for a rollback, the release whose image and
	// variables it runs again; absent for the other kinds.
	RollbackTo int `json:"rollbackTo,omitempty"`
	// Description says why the release exists, for people: "Deploy
	// abc1234", "Rollback to v2", "Set FOO; unset BAR".
	Description string `json:"description"`
	Image       string `json:"image"`
	// Build is the number of the build whose image the release runs: a
	// push's own, or for a rollback or a config release the build of the
	// release whose image it runs again; 0 when that is not known.
	Build int `json:"build,omitempty"`
	// Current is true for the release that serves traffic.
	Current bool `json:"current"`
	// Status is current, superseded, pruned or failed (the Release*
	// constants): failed for a release whose rollout failed, which never
	// served and cannot be rolled back to.
	Status string `json:"status" enum:"current,superseded,pruned,failed"`
	// Failure says why a failed release did not go out, in the words the
	// push or the API answered then; absent for the other statuses.
	Failure   string    `json:"failure,omitempty"`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
	// PrunedAt is when the release's image and files were deleted, past
	// the platform's release retention: it stays in the history but cannot
	// be rolled back to. Absent while they are kept.
	PrunedAt *time.Time `json:"prunedAt,omitempty"`
}

// The kinds of release, as Release.Kind says them. Scaling, restarts,
// maintenance mode and app settings make no release.
const (
	// ReleaseKindDeploy: a push; the image its build made.
	ReleaseKindDeploy = "deploy"
	// ReleaseKindRollback: an earlier release's image and variables again
	// (Release.RollbackTo).
	ReleaseKindRollback = "rollback"
	// ReleaseKindConfig: the current image with changed variables.
	ReleaseKindConfig = "config"
)

// RollbackRequest is the body of POST /api/v1/apps/{app}/rollback.
type RollbackRequest struct {
	// Release is the release to go back to; 0 means the one before the
	// current.
	Release int `json:"release,omitempty"`
}

// Rollback answers a rollback.
type Rollback struct {
	// Release is the new release, which runs what RolledBackTo ran.
	Release      int `json:"release"`
	RolledBackTo int `json:"rolledBackTo"`
}

// EnvVar is one environment variable of an app. A secret variable's value
// is never sent back.
type EnvVar struct {
	Name string `json:"name"`
	// Value is the value of a plain variable; absent for a secret one.
	Value *string `json:"value,omitempty"`
	// Secret is true when the value is kept in a Secret.
	Secret bool `json:"secret,omitempty"`
}

// PatchEnvRequest is the body of PATCH /api/v1/apps/{app}/env: variables
// to set and names to unset, in one change. A name may not be in both.
// Unless NoRelease, a change to an app that has a release makes a new
// release of the current one's image with the new environment and rolls it
// out; the answer's ReleaseHeader names it.
type PatchEnvRequest struct {
	Set map[string]string `json:"set,omitempty"`
	// Secret keeps the values of Set in the app's Secret instead of the
	// App object.
	Secret bool     `json:"secret,omitempty"`
	Unset  []string `json:"unset,omitempty"`
	// NoRelease stores the change without releasing it: it goes out with
	// the next release (a push, or a change that releases).
	NoRelease bool `json:"noRelease,omitempty"`
}

// ReleaseHeader, on the answer to PATCH /api/v1/apps/{app}/env, is the
// number of the release that rolled the change out; absent when none did.
const ReleaseHeader = "Bex-Release"

// RestartRequest is the body of POST /api/v1/apps/{app}/restart.
type RestartRequest struct {
	// Process is the process type to restart ("web", "worker"); empty
	// restarts every process that runs instances.
	Process string `json:"process,omitempty"`
}

// Restart answers a restart: the release whose instances were replaced,
// and the processes restarted.
type Restart struct {
	Release   int      `json:"release"`
	Processes []string `json:"processes"`
}

// ScaleRequest is the body of POST /api/v1/apps/{app}/scale: at least one
// of the two.
type ScaleRequest struct {
	// Processes maps process types to how many instances of each run
	// ("web": 3, "worker": 1), 0 to MaxInstancesPerProcess; the types
	// left out keep theirs.
	Processes map[string]int `json:"processes,omitempty"`
	// Plan, when set, is the plan each instance runs on: starter,
	// standard or pro.
	Plan string `json:"plan,omitempty"`
}

// MaxInstancesPerProcess is how many instances of one process an app may
// run, whatever its plan (the App's spec.processes[].replicas maximum).
const MaxInstancesPerProcess = 20

// Scale answers a scale: the release it applied to (0 when the app has
// no release yet and only its spec changed), the instance count of each
// process the App runs now, and its plan.
type Scale struct {
	Release   int            `json:"release"`
	Processes map[string]int `json:"processes"`
	Plan      string         `json:"plan"`
}

// LogLine is one line an app's process printed; GET .../logs streams them
// as JSON lines (application/x-ndjson).
type LogLine struct {
	Time time.Time `json:"time"`
	// Process is the process type: web, worker.
	Process string `json:"process"`
	// Instance tells the copies of a process apart: the index bex ps
	// names it by ("0" for web.0), on every runtime.
	Instance string `json:"instance,omitempty"`
	// Stream is stdout or stderr, or bex for the platform's own lines
	// about the instance (the process runtime's); on a cluster every line
	// of the app is stdout.
	Stream string `json:"stream,omitempty"`
	Text   string `json:"text"`
}

// AddSSHKeyRequest is the body of POST /api/v1/ssh-keys.
type AddSSHKeyRequest struct {
	// Name defaults to the key's comment.
	Name string `json:"name,omitempty"`
	// PublicKey is one line of an authorized_keys file, such as the
	// content of ~/.ssh/id_ed25519.pub.
	PublicKey string `json:"publicKey"`
}

// SSHKey is a public key a tenant's member pushes with.
type SSHKey struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// User is the member who added it, whose role a push with it has;
	// empty for a key of the tenant's (added with a machine token).
	User        string    `json:"user,omitempty"`
	Fingerprint string    `json:"fingerprint"`
	PublicKey   string    `json:"publicKey"`
	CreatedAt   time.Time `json:"createdAt"`
}

// Health answers GET /api/v1/healthz: Status is "ok" (200) or "down"
// (503).
type Health struct {
	Status string `json:"status"`
}

// AddRouteRequest is the body of POST /api/v1/apps/{app}/routes.
type AddRouteRequest struct {
	// Hostname is the DNS name to serve, such as www.example.com, or a
	// wildcard such as *.example.com; it is lowercased.
	Hostname string `json:"hostname"`
	// PathPrefix limits the route to request paths under it; default "/".
	PathPrefix string `json:"pathPrefix,omitempty"`
	// TLS is Auto (default: a certificate is obtained on the first HTTPS
	// request once DNS points at the platform) or None (plain HTTP only).
	TLS string `json:"tls,omitempty"`
}

// Route is a custom hostname of an app and what the platform observed
// about it.
type Route struct {
	Hostname   string `json:"hostname"`
	PathPrefix string `json:"pathPrefix"`
	App        string `json:"app"`
	// Process is the process that receives the traffic, normally web.
	Process string `json:"process"`
	// TLS is Auto, None or Secret.
	TLS string `json:"tls"`
	// Ready is true when the platform serves the hostname.
	Ready bool `json:"ready"`
	// Status is the Ready condition in a word: "ready", "not ready", or
	// "pending" before the platform first looked at the route; the
	// condition's message is in StatusMessage.
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	// Conditions are Ready, Admitted, DomainVerified, DNSReady and
	// CertificateReady, as the Route controller last wrote them.
	Conditions []RouteCondition `json:"conditions"`
	// Verification is the DNS TXT record that proves the tenant owns the
	// hostname: the platform serves the hostname only once the record
	// holds Value. Nil for an app's default hostname, which needs none.
	Verification *DomainVerification `json:"verification,omitempty"`
	// Verified is true when the platform found the record (the
	// DomainVerified condition is True).
	Verified bool `json:"verified"`
	// DNSTarget is what the hostname's DNS record must point at.
	DNSTarget DNSTarget `json:"dnsTarget"`
	CreatedAt time.Time `json:"createdAt"`
}

// DomainVerification is the TXT record that proves a tenant owns a
// hostname, as a DNS provider's form asks for it.
type DomainVerification struct {
	// Type is TXT.
	Type string `json:"type"`
	// Name is _bex-challenge.<hostname>; for *.example.com,
	// _bex-challenge.example.com.
	Name string `json:"name"`
	// Value is the tenant's token for the hostname, the same every time it
	// is asked for.
	Value string `json:"value"`
}

// RouteCondition is one condition of a route.
type RouteCondition struct {
	Type string `json:"type"`
	// Status is True, False or Unknown.
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// Since is when the status last changed.
	Since time.Time `json:"since"`
}

// DNSTarget is what a route's hostname must point at: a CNAME record to
// CNAME, or, where a CNAME cannot be (the apex of a zone, such as
// example.com), A and AAAA records to Addresses.
type DNSTarget struct {
	// CNAME is the app's default hostname.
	CNAME string `json:"cname"`
	// Addresses are the edge's public addresses; empty when the operator
	// configured none (then only the CNAME works).
	Addresses []string `json:"addresses,omitempty"`
}

// AuditEntry is one line of the audit log: who did what to what, from
// where.
type AuditEntry struct {
	ID int64     `json:"id"`
	At time.Time `json:"at"`
	// Tenant is the tenant acted on or for; empty for platform actions.
	Tenant string `json:"tenant,omitempty"`
	// Actor is a user's email, "token:<name>" or a component's name.
	Actor string `json:"actor"`
	// Action is a dotted verb: "app.create", "release.rollback".
	Action     string          `json:"action"`
	Target     string          `json:"target,omitempty"`
	SourceAddr string          `json:"sourceAddr,omitempty"`
	Details    json.RawMessage `json:"details,omitempty"`
}

// AuditQuery filters GET /api/v1/admin/audit. Zero fields select all.
type AuditQuery struct {
	Tenant, Actor, Action string
	// Since is a duration back from now ("24h") or an RFC 3339 time.
	Since string
	// Before pages back: entries older than this ID.
	Before int64
	Limit  int
}

// Quotas are what a tenant may have and use. The operator sets the
// platform's defaults (flags --quota-*, chart values quotas.*) and may
// override each for one tenant.
type Quotas struct {
	// Apps is how many apps the tenant may have.
	Apps int `json:"apps"`
	// Routes is how many custom routes it may have over all its apps.
	Routes int `json:"routes"`
	// ConcurrentBuilds is how many of its builds may run at once.
	ConcurrentBuilds int `json:"concurrentBuilds"`
	// RepoBytes is how many bytes its git repositories may take on disk.
	RepoBytes int64 `json:"repoBytes"`
	// BuildMinutes is how many minutes its builds may take per calendar
	// month (UTC).
	BuildMinutes int `json:"buildMinutes"`
	// ConcurrentRuns is how many of its one-off runs (bex run) may run at
	// once.
	ConcurrentRuns int `json:"concurrentRuns"`
	// Instances is how many instances its apps may run together, over all
	// their processes (a scale, a push or a change that runs more past it
	// is refused).
	Instances int `json:"instances"`
	// MilliCPU is how much CPU its apps' instances may request together,
	// in millicores: each instance counts its plan's CPU (starter 250m,
	// standard 1000m, pro 2000m) or spec.resources'.
	MilliCPU int64 `json:"cpu"`
	// MemoryBytes is how much memory its apps' instances may request
	// together, in bytes (starter 512 MiB, standard 2 GiB, pro 4 GiB each).
	MemoryBytes int64 `json:"memory"`
}

// QuotaOverrides are the quotas the operator set for one tenant; a field
// left out (or null) is the platform's default.
type QuotaOverrides struct {
	Apps             *int   `json:"apps,omitempty"`
	Routes           *int   `json:"routes,omitempty"`
	ConcurrentBuilds *int   `json:"concurrentBuilds,omitempty"`
	RepoBytes        *int64 `json:"repoBytes,omitempty"`
	BuildMinutes     *int   `json:"buildMinutes,omitempty"`
	ConcurrentRuns   *int   `json:"concurrentRuns,omitempty"`
	Instances        *int   `json:"instances,omitempty"`
	// MilliCPU is in millicores (16000: 16 CPUs).
	MilliCPU *int64 `json:"cpu,omitempty"`
	// MemoryBytes is in bytes.
	MemoryBytes *int64 `json:"memory,omitempty"`
}

// QuotaPatch is the body of PATCH /api/v1/admin/tenants/{tenant}/quota:
// the quotas to change, by their keys in QuotaOverrides (apps, cpu,
// memory...). A number sets the quota for the tenant (cpu in millicores,
// repoBytes and memory in bytes); null or "default" gives it the
// platform's default again; a quota left out keeps what it has. Under
// QuotaExpectKey, an object of the same shape gives, for the quotas it
// names, the override the sender expects the tenant to have now (null or
// "default": none): the patch is made only if each still holds, else
// nothing is changed and the answer is 409 with ErrorBody.Conflicts.
type QuotaPatch map[string]json.RawMessage

// QuotaExpectKey is the key of QuotaPatch that holds the expected
// overrides.
const QuotaExpectKey = "expect"

// QuotaUsage is what a tenant has of each quota. The size of its
// repositories is measured by the git receiver at each push and is not
// shown here.
type QuotaUsage struct {
	Apps          int `json:"apps"`
	Routes        int `json:"routes"`
	RunningBuilds int `json:"runningBuilds"`
	// BuildMinutes is the time its builds took since BuildMinutesSince,
	// rounded down.
	BuildMinutes int `json:"buildMinutes"`
	// RunningRuns is how many of its one-off runs run.
	RunningRuns int `json:"runningRuns"`
	// Instances is how many instances its apps run together, as the
	// platform last deployed them.
	Instances int `json:"instances"`
	// MilliCPU is the CPU those instances request together, in
	// millicores.
	MilliCPU int64 `json:"cpu"`
	// MemoryBytes is the memory they request together, in bytes.
	MemoryBytes int64 `json:"memory"`
}

// Quota answers GET /api/v1/quota and the operators'
// /api/v1/admin/tenants/{tenant}/quota: a tenant's quotas, what the
// operator set of them, and its usage.
type Quota struct {
	Tenant string `json:"tenant"`
	// Quotas are in force: the defaults with Overrides.
	Quotas    Quotas         `json:"quotas"`
	Overrides QuotaOverrides `json:"overrides"`
	// Defaults are the platform's quotas for a tenant the operator set
	// none for.
	Defaults Quotas     `json:"defaults"`
	Usage    QuotaUsage `json:"usage"`
	// BuildMinutesSince is the start of the build minutes' window: the
	// first of this month, 00:00 UTC.
	BuildMinutesSince time.Time `json:"buildMinutesSince"`
}
