// Package api is bex's platform JSON API under /api/v1: what the CLI, the
// dashboard and scripts call. It owns the HTTP surface for tenants (apps,
// builds and their logs, releases and rollback, env, runtime logs, the
// instances that run, custom hostnames, SSH keys, members and invitations,
// tokens) and for operators (creating tenants; planning,
// starting, following, pausing, resuming and aborting fleet upgrades;
// cordoning and uncordoning the fleet's clusters; creating and deleting
// clusters of the local fleet where the platform runs one), its
// authentication by bearer token, its error answers, its audit entries and
// its OpenAPI document.
//
// It takes its state from two places and adds none of its own: the App and
// Route objects and the env Secrets in the tenant's namespace of the
// management cluster (a controller-runtime client), the cluster-scoped
// FleetUpgrades and the Cluster API Clusters and KubeadmControlPlanes it
// plans over, and the Postgres store (tenants, tokens, SSH keys, builds,
// releases, the audit log, the fleet-upgrade records). Three small
// interfaces, Releaser, LogSource and InstanceSource, hand rollbacks,
// runtime log reads and instance reads to whoever runs apps; RuntimeLogs
// and RuntimeInstances adapt a runtime driver to the last two. A third, LocalFleet,
// says whether make run's local fleet can take clusters now.
//
// One thing it holds in memory: the one-off runs its process runs (they
// run in the server that started them), which it ends when a stop is
// asked of one, through it or, read from the store while it holds any,
// through another replica (runstops.go). Server.Run, which its caller
// runs beside the handler, says in the store that this process is alive
// for its runs and marks lost the runs of processes that stopped saying
// so (lostruns.go).
//
// Every route but healthz, openapi.json and invitations/accept needs
// "Authorization: Bearer <token>". A tenant's token reaches only its
// tenant: another tenant's app answers 404 as if it did not exist. Every
// route of the table in routes.go declares the least tenant role it needs
// (viewer, developer, admin); a token acts with its member's role (a
// machine token's is admin) narrowed by its scope, read on each request,
// and below the route's role it gets 403 naming the role. An operator's token reaches
// /api/v1/admin/, /api/v1/upgrades and /api/v1/fleet. Errors are JSON {"message",
// "field", "quota", "role"}; a refused request changes nothing; every change writes one
// audit entry.
package api
