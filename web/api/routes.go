package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// route is one route of the API and what its OpenAPI operation says.
type route struct {
	method  string
	path    string // under Prefix, with echo's :param segments
	handler echo.HandlerFunc
	access  access

	summary string
	// request names the schema of the JSON body; "" for none.
	request string
	// requestOptional is true when the body may be left out.
	requestOptional bool
	// response names the schema of the 2xx JSON answer ("[]X" for an
	// array); "" for 204 No Content. responseType overrides the media
	// type for streams.
	response     string
	responseType string
	status       int // the success status; 200 when zero
	query        []param
	// accepted names the schema of a 202 Accepted answer the route gives
	// besides status (a detached run's); "" for none.
	accepted string
}

// param is a query parameter.
type param struct {
	name, typ, description string
}

var (
	followParam = param{"follow", "boolean", "Keep streaming new lines until the build ends (build logs) or the client goes away (runtime logs)."}
	tailParam   = param{"tail", "integer", "How many of the latest lines to send first (default 100, at most 10000)."}
	limitParam  = param{"limit", "integer", "The most items to return (default 50, at most 1000)."}
)

// routeTable lists every route the server registers; the OpenAPI document
// is made from it.
func (s *Server) routeTable() []route {
	return []route{
		{method: http.MethodGet, path: "/healthz", handler: s.healthz, access: public,
			summary: "Readiness: 200 {status: ok} when every component is ready, 503 {status: down} otherwise; the reason only for an operator's token", response: "Health"},
		{method: http.MethodGet, path: "/openapi.json", handler: s.openAPI, access: public,
			summary: "This document", response: "OpenAPIDocument"},
		{method: http.MethodGet, path: "/whoami", handler: s.whoAmI, access: anyToken,
			summary: "Whom the token acts for", response: "WhoAmI"},

		{method: http.MethodPost, path: "/sessions", handler: s.createSession, access: anyToken,
			summary: "Open a session: a token of its own that acts as the caller's until it expires, is ended, or the caller's token is revoked (the dashboard's sign-in)",
			request: "CreateSessionRequest", requestOptional: true, response: "Session", status: http.StatusCreated},
		{method: http.MethodDelete, path: "/sessions/current", handler: s.endSession, access: anyToken,
			summary: "End the session whose token calls: it is revoked at once (the dashboard's sign-out)", status: http.StatusNoContent},

		{method: http.MethodGet, path: "/admin/tenants", handler: s.listTenants, access: operator,
			summary: "List tenants (operators)", response: "[]Tenant"},
		{method: http.MethodPost, path: "/admin/tenants", handler: s.createTenant, access: operator,
			summary: "Create a tenant: its namespace, its row and a first API token, whose secret is answered once (operators)",
			request: "CreateTenantRequest", response: "CreatedTenant", status: http.StatusCreated},
		{method: http.MethodGet, path: "/admin/tenants/:tenant/quota", handler: s.adminGetQuota, access: operator,
			summary: "Show a tenant's quotas, those the operator set for it, and its usage (operators)", response: "Quota"},
		{method: http.MethodGet, path: "/admin/tenants/:tenant/members", handler: s.adminListMembers, access: operator,
			summary: "List a tenant's members by email: their roles and when they joined (operators)", response: "[]Member"},
		{method: http.MethodPost, path: "/admin/tenants/:tenant/members", handler: s.adminInvite, access: operator,
			summary: "Invite an email into a tenant with a role, as its admins do (POST /members): the answer holds the invitation's single-use code, good for 7 days; " +
				"a member already answers 409; audited as tenant.member.invite in the tenant's log (operators)",
			request: "InviteRequest", response: "Invitation", status: http.StatusCreated},
		{method: http.MethodGet, path: "/admin/tenants/:tenant/invitations", handler: s.adminListInvitations, access: operator,
			summary: "List a tenant's pending invitations, without their codes (operators)", response: "[]Invitation"},
		{method: http.MethodDelete, path: "/admin/tenants/:tenant/invitations/:id", handler: s.adminRevokeInvitation, access: operator,
			summary: "Revoke a tenant's pending invitation, as its admins do (DELETE /invitations/{id}): its code stops working; " +
				"audited as tenant.invitation.revoke in the tenant's log (operators)",
			status: http.StatusNoContent},
		{method: http.MethodPatch, path: "/admin/tenants/:tenant/members/:email", handler: s.adminSetMemberRole, access: operator,
			summary: "Give a tenant's member another role; demoting its last admin answers 409 and changes nothing; audited as tenant.member.role in the tenant's log (operators)",
			request: "SetRoleRequest", response: "Member"},
		{method: http.MethodDelete, path: "/admin/tenants/:tenant/members/:email", handler: s.adminRemoveMember, access: operator,
			summary: "Remove a tenant's member: their tokens, sessions and SSH keys stop working at once; removing its last admin answers 409 and changes nothing; " +
				"audited as tenant.member.remove in the tenant's log (operators)",
			status: http.StatusNoContent},
		{method: http.MethodPut, path: "/admin/tenants/:tenant/quota", handler: s.adminSetQuota, access: operator,
			summary: "Set a tenant's quotas: each one given overrides the platform's default, each one left out is the default again; what the tenant has already stays (operators)",
			request: "QuotaOverrides", response: "Quota"},
		{method: http.MethodPatch, path: "/admin/tenants/:tenant/quota", handler: s.adminPatchQuota, access: operator,
			summary: "Change some of a tenant's quotas: a number sets one, null or \"default\" gives it the default again, one left out keeps what it has, " +
				"whoever set it, so two operators changing different quotas at once both keep theirs. A bad quota answers 422 naming it, and nothing is changed; " +
				"what the tenant has already stays (operators)",
			request: "QuotaPatch", response: "Quota"},

		{method: http.MethodGet, path: "/admin/audit", handler: s.listAudit, access: operator,
			summary: "The audit log, newest first (operators)", response: "[]AuditEntry",
			query: []param{
				{"tenant", "string", "Only entries of this tenant (its name)."},
				{"actor", "string", "Only entries by this actor: an email or token:<name>."},
				{"action", "string", "Only this action, such as app.create."},
				{"since", "string", "Only entries since a duration ago (24h) or an RFC 3339 time."},
				{"before", "integer", "Only entries older than this ID, to page back."},
				limitParam,
			}},
		{method: http.MethodGet, path: "/fleet", handler: s.listFleet, access: operator,
			summary:  "The Cluster API clusters of the fleet: control-plane machines and versions, whether MVP is wired, and whether each is cordoned (operators)",
			response: "[]FleetCluster"},
		{method: http.MethodPost, path: "/fleet/local-clusters", handler: s.createLocalCluster, access: operator,
			summary: "Create a cluster of the local fleet, whose machines are processes on the platform's machine: its Cluster, KubeadmControlPlane, " +
				"LocalCluster and LocalMachineTemplate; a platform without a local fleet answers 501, one still starting it 503 (operators)",
			request: "CreateLocalClusterRequest", response: "LocalCluster", status: http.StatusCreated},
		{method: http.MethodDelete, path: "/fleet/local-clusters/:name", handler: s.deleteLocalCluster, access: operator,
			summary: "Delete a cluster of the local fleet: Cluster API deletes its machines and the provider stops their processes; " +
				"a cluster of another provider, or one a fleet upgrade is rolling, answers 409 (operators)",
			response: "LocalClusterDeletion", status: http.StatusAccepted},
		{method: http.MethodPut, path: "/fleet/clusters/:namespace/:name/cordon", handler: s.cordonCluster, access: operator,
			summary: "Cordon a Cluster API cluster of the fleet, of any provider (the annotation scheduling.bex.co/cordoned=true, merge-patched alone): " +
				"the scheduler places no app on it, and the App controller moves the apps it runs to other clusters. " +
				"One cordoned already is left as it is (changed false); audited as fleet.cordon (operators)",
			response: "ClusterCordon"},
		{method: http.MethodDelete, path: "/fleet/clusters/:namespace/:name/cordon", handler: s.uncordonCluster, access: operator,
			summary: "Uncordon a Cluster API cluster of the fleet (removes the annotation): the scheduler places apps on it again; " +
				"the apps moved off it stay where they are. One not cordoned is left as it is (changed false); audited as fleet.uncordon (operators)",
			response: "ClusterCordon"},

		{method: http.MethodPost, path: "/upgrades/plan", handler: s.planUpgrade, access: operator,
			summary: "Plan a fleet upgrade over the Cluster API clusters of the management cluster: stages, and the clusters skipped or refused with why; changes nothing (operators)",
			request: "UpgradePlanRequest", response: "UpgradePlan"},
		{method: http.MethodPost, path: "/upgrades", handler: s.createUpgrade, access: operator,
			summary: "Start a fleet upgrade: create the (cluster-scoped) FleetUpgrade the controller rolls out (operators)",
			request: "CreateUpgradeRequest", response: "Upgrade", status: http.StatusCreated},
		{method: http.MethodGet, path: "/upgrades", handler: s.listUpgrades, access: operator,
			summary: "List the fleet upgrades, newest first, with their phase and recorded run state (operators)", response: "[]Upgrade"},
		{method: http.MethodGet, path: "/upgrades/:name", handler: s.getUpgrade, access: operator,
			summary:  "Show a fleet upgrade: phase, conditions, each cluster's steps and last verification, and the steps recorded in Postgres with probe counts (operators)",
			response: "Upgrade", query: []param{{"probes", "boolean", "Include the samples of failed probes of each recorded step."}}},
		{method: http.MethodPost, path: "/upgrades/:name/pause", handler: s.pauseUpgrade, access: operator,
			summary: "Pause a fleet upgrade at the next machine boundary (spec.paused) (operators)", response: "UpgradeChange"},
		{method: http.MethodPost, path: "/upgrades/:name/resume", handler: s.resumeUpgrade, access: operator,
			summary: "Resume a paused fleet upgrade; an aborted one answers 409 (operators)", response: "UpgradeChange"},
		{method: http.MethodPost, path: "/upgrades/:name/abort", handler: s.abortUpgrade, access: operator,
			summary: "Abort a fleet upgrade for good (spec.abort): it cannot be resumed; a cluster mid-rollout is left paused at mixed versions (operators)", response: "UpgradeChange"},

		{method: http.MethodGet, path: "/quota", handler: s.getQuota, access: tenantViewer,
			summary: "The tenant's quotas (apps, routes, concurrent builds, repository size, build minutes a month) and its usage; a request beyond one answers 403 naming it", response: "Quota"},

		{method: http.MethodGet, path: "/apps", handler: s.listApps, access: tenantViewer,
			summary: "List the tenant's apps", response: "[]App"},
		{method: http.MethodPost, path: "/apps", handler: s.createApp, access: tenantDeveloper,
			summary: "Create an app", request: "CreateAppRequest", response: "App", status: http.StatusCreated},
		{method: http.MethodGet, path: "/apps/:app", handler: s.getApp, access: tenantViewer,
			summary: "Show an app, its git remote and URL", response: "App"},
		{method: http.MethodPatch, path: "/apps/:app", handler: s.updateApp, access: tenantDeveloper,
			summary: "Change an app's settings: health check, instance counts, plan, deploy branch, maintenance mode; those left out keep theirs. " +
				"Counts and plan apply at once to the current release as a scale does; maintenance true stops every instance (the release stays) and the edge answers 503 " +
				"with a maintenance page, false runs the current release again; a new health check rolls the current release's instances, each passing it before it takes traffic (instances that fail it leave the old ones serving: 409, nothing changed); the branch applies from the next push. " +
				"No release is made. Every field is checked first: an unknown field or a bad value answers 422 naming it, counts over a limit 403, and a refusal changes nothing. " +
				"Answers the app as GET does",
			request: "UpdateAppRequest", response: "App"},
		{method: http.MethodDelete, path: "/apps/:app", handler: s.deleteApp, access: tenantAdmin,
			summary: "Delete an app and its env Secret; its builds and releases stay on record", status: http.StatusNoContent},

		{method: http.MethodGet, path: "/builds", handler: s.listAllBuilds, access: tenantViewer,
			summary: "List the builds of every app of the tenant, newest first", response: "[]Build", query: []param{limitParam}},
		{method: http.MethodGet, path: "/apps/:app/builds", handler: s.listBuilds, access: tenantViewer,
			summary: "List an app's builds, newest first", response: "[]Build", query: []param{limitParam}},
		{method: http.MethodGet, path: "/apps/:app/builds/:build", handler: s.getBuild, access: tenantViewer,
			summary: "Show a build; build is its number or latest", response: "Build"},
		{method: http.MethodGet, path: "/apps/:app/builds/:build/log", handler: s.buildLog, access: tenantViewer,
			summary: "A build's output as text, one line per line; with follow=true, streamed until the build ends " +
				"(a tenant follows a bounded number of logs at once: 429 past it)",
			response: "text", responseType: "text/plain", query: []param{followParam}},

		{method: http.MethodGet, path: "/apps/:app/releases", handler: s.listReleases, access: tenantViewer,
			summary: "List an app's releases, newest first; with kind, only those of the kinds given; with status, only those that went out or failed; with before, those older than a release", response: "[]Release",
			query: []param{{"kind", "string", "Kinds of release to list, separated by commas: deploy, rollback, config (kind=deploy,rollback). " +
				"The limit counts only those. An unknown kind, or kind given twice, is a 422 on kind."},
				{"status", "string", "Statuses of release to list, separated by commas: succeeded (it went out: current, superseded or pruned now) or failed (its rollout failed) (status=failed). " +
					"With kind, both hold; the limit counts only those. An unknown status, or status given twice, is a 422 on status."}, limitParam,
				{"before", "string", "Only releases numbered below this one (3 or v3): the next page after a page whose last release it is."}}},
		{method: http.MethodGet, path: "/apps/:app/releases/:release", handler: s.getRelease, access: tenantViewer,
			summary: "Show one release in full (release is its number, 3 or v3): its build and commit, who made it and when, whether it serves, " +
				"its variables by name and what it changed from the release before (names only: a value is never shown)", response: "ReleaseInfo"},
		{method: http.MethodPost, path: "/apps/:app/rollback", handler: s.rollback, access: tenantDeveloper,
			summary: "Roll back to a release (default: the one before the current), as a new release",
			request: "RollbackRequest", requestOptional: true, response: "Rollback", status: http.StatusCreated},
		{method: http.MethodPost, path: "/apps/:app/restart", handler: s.restart, access: tenantDeveloper,
			summary: "Restart the current release: new instances of one process, or of every process, replace the running ones as in a rollout " +
				"(a web instance gets traffic once healthy); no release is made. An app without a release answers 409, a process it does not run 422",
			request: "RestartRequest", requestOptional: true, response: "Restart"},
		{method: http.MethodPost, path: "/apps/:app/scale", handler: s.scale, access: tenantDeveloper,
			summary: "Scale: set how many instances of each process run, and the plan, applied at once to the current release " +
				"(instances added or drained and stopped, none replaced; a new plan rolls every instance); no release is made, the App keeps the counts. " +
				"An app without a release only stores them. Bad counts or an unknown process answer 422, counts over a limit 403 naming the quota",
			request: "ScaleRequest", response: "Scale"},
		{method: http.MethodPost, path: "/apps/:app/runs", handler: s.createRun, access: tenantDeveloper,
			summary: "Run a one-off command in a fresh instance of the current release (its image, env with secrets, sandbox and plan limits; no port, no traffic). " +
				"The request carries Connection: Upgrade and Upgrade: bex-run.v1; once the instance is ready the answer is 101 Switching Protocols " +
				"(headers Bex-Run, Bex-Release) and the connection carries frames both ways: an 8-byte header (stream, 3 zero bytes, big-endian uint32 length, " +
				"as Docker's attach) then up to 32 KiB; streams 0 stdin (client; empty closes it), 1 stdout, 2 stderr, 3 exit (last, a RunExit), 4 resize (client, a TerminalSize). " +
				"Closing the connection kills the command; it is stopped after timeoutSeconds (default 1 h, at most 24 h). The run is recorded and audited as app.run. " +
				"Stdin frames are read when the request has stdin or terminal. On a workload cluster a run without stdin or terminal has its stdout and stderr merged on stdout. " +
				"Without the upgrade 426; an app without a release 409; over the concurrentRuns quota 403 naming it; stdin or terminal on a runtime that takes no input 422 on stdin; " +
				"a runtime that runs no one-off commands 501. With detach: true and no upgrade, a detached run: 202 with the Run once it runs, its output going to the app's log " +
				"as run.N's lines and its end to its record; stdin or terminal with detach 422 on detach",
			request: "RunRequest", status: http.StatusSwitchingProtocols, accepted: "Run"},
		{method: http.MethodGet, path: "/apps/:app/runs", handler: s.listRuns, access: tenantViewer,
			summary: "List an app's one-off runs, newest first: who ran which command in which release, when, and how it ended", response: "[]Run", query: []param{limitParam}},
		{method: http.MethodPost, path: "/apps/:app/runs/:run/stop", handler: s.stopRun, access: tenantDeveloper,
			summary: "Stop a one-off run, attached or detached (run is its number, 3 or run.3), as its time limit would: its command gets SIGTERM, then SIGKILL after the grace period, " +
				"wherever it runs (the API server that runs it ends it within a second when another got the request). Answers 202 with the Run once the stop is recorded " +
				"(stopRequestedAt, stopRequestedBy; status still running): its end comes to its record, with exit status 143 and reason \"stopped by <who>\", " +
				"and an attached run's client gets it as its exit frame. Audited as app.run.stop. A run that has ended answers 409, an unknown one 404",
			response: "Run", status: http.StatusAccepted},

		{method: http.MethodGet, path: "/apps/:app/metrics", handler: s.appMetrics, access: tenantViewer,
			summary: "An app's CPU (cores), memory, instances and restarts from its runtime, and its requests, 5xx and p50/p99 latency from the edge, " +
				"one point per interval (10 s, kept 1 h), oldest first; null where not measured, and note says why (CPU and memory on a kube cluster). " +
				"A since outside the interval to the retention answers 400; a server that keeps no series 501",
			response: "AppMetrics", query: []param{{"since", "string", "How far back, a Go duration from the interval to the retention (default and at most 1h): 15m, 90s."}}},
		{method: http.MethodGet, path: "/apps/:app/instances", handler: s.listInstances, access: tenantViewer,
			summary: "What runs of the app now, as the runtime reports it: each instance's process, release, state (starting, up, unhealthy, crashed, stopping), " +
				"restarts after crashes and since when it is in its state, and the cluster the app runs on; then its one-off runs that run " +
				"(run.3: command, who started it, since when, attached or detached, stopping once a stop was asked). An app that runs nothing has no instances; " +
				"a runtime that does not answer leaves the instances out, not the runs: 200 with instancesError saying why", response: "Instances"},

		{method: http.MethodGet, path: "/apps/:app/env", handler: s.listEnv, access: tenantDeveloper,
			summary: "List an app's environment; secret values are not shown", response: "[]EnvVar"},
		{method: http.MethodPatch, path: "/apps/:app/env", handler: s.patchEnv, access: tenantDeveloper,
			summary: "Set and unset environment variables in one change; with secret=true the values go into the Secret <app>-env. " +
				"Unless noRelease, an app with a release gets a new release of its current image with the new environment, rolled out at once " +
				"(header Bex-Release: its number); a rollout that fails answers 409 with why, the change stays stored and the previous release serves",
			request: "PatchEnvRequest", response: "[]EnvVar"},

		{method: http.MethodGet, path: "/apps/:app/routes", handler: s.listRoutes, access: tenantViewer,
			summary: "List an app's custom hostnames with what the platform observed: admission, DNS, certificate", response: "[]Route"},
		{method: http.MethodPost, path: "/apps/:app/routes", handler: s.addRoute, access: tenantDeveloper,
			summary: "Add a custom hostname to an app; the answer says which DNS record to create",
			request: "AddRouteRequest", response: "Route", status: http.StatusCreated},
		{method: http.MethodDelete, path: "/apps/:app/routes/:hostname", handler: s.removeRoute, access: tenantDeveloper,
			summary: "Remove a custom hostname from an app", status: http.StatusNoContent,
			query: []param{{"pathPrefix", "string", "The route's path prefix (default /)."}}},

		{method: http.MethodGet, path: "/apps/:app/logs", handler: s.appLogs, access: tenantViewer,
			summary: "The app's runtime output as JSON lines; with follow=true, streamed until the client goes away " +
				"(a tenant follows a bounded number of logs at once: 429 past it)",
			response: "LogLine", responseType: "application/x-ndjson", query: []param{followParam, tailParam}},

		{method: http.MethodGet, path: "/ssh-keys", handler: s.listSSHKeys, access: tenantViewer,
			summary: "List the tenant's SSH keys", response: "[]SSHKey"},
		{method: http.MethodPost, path: "/ssh-keys", handler: s.addSSHKey, access: tenantDeveloper,
			summary: "Register an SSH key for git pushes", request: "AddSSHKeyRequest", response: "SSHKey", status: http.StatusCreated},
		{method: http.MethodDelete, path: "/ssh-keys/:id", handler: s.deleteSSHKey, access: tenantDeveloper,
			summary: "Remove an SSH key; another member's needs the admin role", status: http.StatusNoContent},

		{method: http.MethodGet, path: "/members", handler: s.listMembers, access: tenantViewer,
			summary: "List the tenant's members and their roles (viewer, developer, admin)", response: "[]Member"},
		{method: http.MethodPost, path: "/members", handler: s.invite, access: tenantAdmin,
			summary: "Invite an email with a role: the answer holds the invitation's single-use code, good for 7 days (a pending invitation of the same email is replaced); " +
				"a member already answers 409",
			request: "InviteRequest", response: "Invitation", status: http.StatusCreated},
		{method: http.MethodPatch, path: "/members/:email", handler: s.setMemberRole, access: tenantAdmin,
			summary: "Give a member another role; demoting the last admin answers 409", request: "SetRoleRequest", response: "Member"},
		{method: http.MethodDelete, path: "/members/:email", handler: s.removeMember, access: tenantAdmin,
			summary: "Remove a member: their tokens, sessions and SSH keys stop working at once; removing the last admin answers 409", status: http.StatusNoContent},
		{method: http.MethodGet, path: "/invitations", handler: s.listInvitations, access: tenantAdmin,
			summary: "List the tenant's pending invitations, without their codes", response: "[]Invitation"},
		{method: http.MethodDelete, path: "/invitations/:id", handler: s.revokeInvitation, access: tenantAdmin,
			summary: "Revoke a pending invitation: its code stops working", status: http.StatusNoContent},
		{method: http.MethodPost, path: "/invitations/accept", handler: s.acceptInvitation, access: public,
			summary: "Accept an invitation by its code (no token: the code is the credential): makes the member with the invitation's email and role " +
				"and answers the secret of their first token, once; the code then fails. An unknown, used, revoked or expired code answers 404, an email that is a user already 409",
			request: "AcceptInvitationRequest", response: "AcceptedInvitation", status: http.StatusCreated},

		{method: http.MethodGet, path: "/tokens", handler: s.listTokens, access: tenantViewer,
			summary:  "List your tokens (an admin: every token of the tenant) without their secrets: prefix, scope, owner, created, last used, expiry; sessions and revoked tokens are not listed",
			response: "[]Token"},
		{method: http.MethodPost, path: "/tokens", handler: s.createToken, access: tenantViewer,
			summary: "Make a token of yours with a name, a scope (read, write or full: never more than your role) and an optional expiry within a year; " +
				"the answer holds its secret, once. Needs a token of scope full",
			request: "CreateTokenRequest", response: "CreatedToken", status: http.StatusCreated},
		{method: http.MethodDelete, path: "/tokens/:id", handler: s.revokeToken, access: tenantViewer,
			summary: "Revoke a token of yours (an admin: any of the tenant's): it and its sessions are refused from the next request on, API and git", status: http.StatusNoContent},
	}
}
