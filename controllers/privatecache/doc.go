// Package privatecache gives a reconciler a cache of its own for the few
// objects of a kind it must watch, picked by a selector, in place of the
// manager's cache, which holds every object of a kind it is asked for.
// The reconcilers watch Secrets this way (Cluster API's kubeconfigs in
// controllers/runtimecreds, the runtime Secret in controllers/app): the
// manager's cache holds no Secret's data, and a label or field selector on
// Secrets there would hide from the App and Route controllers the tenants'
// Secrets they watch (docs/fleet.md).
package privatecache
