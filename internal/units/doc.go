// Package units reads and writes the quantities of the tenants' quotas
// as people type and read them: CPU in CPUs ("2.5 CPUs", typed "2.5" or
// "2500m") and sizes in binary units ("32 GiB", typed "32Gi" or "32 GiB").
// The store's quota refusals, the CLI and the dashboard render with it, and
// the CLI's `bex admin quota set` and the console's quota form read with
// it, so that a value reads the same everywhere. It owns no quota.
package units
