// Package controllers wires bex's reconcilers into a controller-runtime
// manager: NewScheme knows every kind they read, Setup registers one
// reconciler per root kind (each in its own package below this one: app,
// route, fleetupgrade, localinfra, and workerhook for Cluster API's worker
// Machines), and Deps carries what they need beyond
// the manager (the release pipeline, the scheduler, DNS, the edge's
// addresses and certificates, the FleetUpgrade reconciler with its
// verifier, the local fleet's host, where apps run); a nil dependency turns off the part
// that needs it. Names lists the controllers Setup always registers,
// LocalFleetNames those the local fleet adds. The commands that run the manager are
// cmd/bex-controller-manager/app and cmd/bex-embedded/app.
//
// Beside them sit what they share: scheme, and privatecache, the caches
// of their own in which they watch a few Secrets each.
//
// Reconcilers are level-based: they read the world, compute, and write, and
// report what a user must see in the object's conditions.
package controllers
