// Package platformtest runs the embedded platform (bex-embedded, what make
// run starts) as an end-to-end test's subject: it builds the binaries, starts
// the platform on a state directory, waits for its env file, and stops it as
// Ctrl-C does (or kills it, as a crash would).
//
// Around it are the helpers the suites share: a client for the apps behind
// the platform's edge (AppClient, GetApp), a Node app and the git commands
// to push it (WriteNodeApp, Git), a controller-runtime client (Client), the
// status Cluster API's KubeadmControlPlane controller would write
// (WriteControlPlaneStatus), a Cluster API Cluster nothing acts on
// (CreateCluster) and the fleet the runtime kubeconfigs' tests start from
// (CreateRuntimeFleet), the steps of a test on make run's local fleet
// (CreateLocalCluster under the machine-wide LockBlocks, WaitFleetReady,
// WaitClusterHealthy, WaitWorker, WaitLocalStandby, WorkloadClient,
// ServedFrom), and the waiting and capturing every test needs:
// Eventually polls a condition, which says why it does not hold yet, until
// a deadline (HasCondition and LastLine help it say so), SyncBuffer
// collects the output of concurrent writers, and SecretLists records a
// controller manager's lists and watches of Secrets with their data.
//
// Only tests and test helpers import it: a package under internal/ from
// its _test.go files.
package platformtest
