// Package app reconciles App objects. Each round it observes what an App
// refers to (the Secrets behind its env), places it on a workload cluster
// when it has a Placer (SchedulerPlacer: a PlacementReview to the
// scheduling.bex.co API, then a Placement named like the App), has the
// tenant's namespace in the runtime prepared (when Releases is also a
// NamespacePreparer), keeps the App's current release running and reads
// its health and the newest build's outcome through Releases, and writes
// the App's Built, Released, Placed and Ready conditions, status.cluster
// and observedGeneration. A running App whose runtime does not tell of its
// changes is observed again every 15 s. With a Placer the controller
// watches the scheduler's ClusterCapacities and brings back the Apps a
// cluster's change concerns (those placed on it when what decides a move
// changed, those placed nowhere when it has more room); while that watch
// is not up, an App off a static cluster is observed every 30 s. Each
// round the Placer keeps the App's Placement (resized
// to the App's web replicas and resources), or moves it when its cluster is
// gone, being deleted, cordoned, mid-upgrade or its pool over-committed and
// the scheduler finds another; the runtime follows status.cluster. With a
// RuntimeSecret, the Apps placed on a cluster are observed again as soon
// as that cluster's runtime kubeconfig is written there or renewed, so an
// App placed on a new cluster runs once its key comes. Deleting
// an App stops what runs for it and removes its Placement before its
// finalizer comes off.
//
// The controller watches the metadata of Secrets only (a change of a
// Secret's data changes its resourceVersion) and reads the Secrets an App's
// env refers to with Reader, uncached, one GET per secretKeyRef per
// reconcile: the manager holds no Secret's data.
//
// The build and release pipeline hands it facts through the App's status
// (currentRelease) and Releases; it never starts builds itself.
package app
