// Package quota holds the platform's default per-tenant quotas and turns
// them, with the overrides the operator set for a tenant in the store
// (store.QuotaOverrides), into the quotas that tenant has.
//
// The defaults are flags (Defaults.AddFlags) of every process that enforces
// a quota: bex-web (apps, routes), bex-git (builds, repository size) and
// bex-embedded (all of them). The checks themselves sit where the state
// changes, so that a refused request changes nothing: the releaser counts
// the instances of a rollout and the CPU and memory they request
// (store.ReserveInstances) before it reaches the runtime, the API counts a
// tenant's apps and routes under the tenant's lock in Postgres
// (store.WithTenantLock), the store checks builds in the transaction that
// records one (store.BuildQuota), and the git receiver measures the
// tenant's repositories before it stores a pushed pack.
package quota
