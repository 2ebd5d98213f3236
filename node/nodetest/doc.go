// Package nodetest gives tests a workload cluster whose Pods a real
// bex-node runs: an apiserver with the Node authorizer and
// NodeRestriction, the pinned kube-controller-manager and kube-scheduler
// (Deployments get their ReplicaSets and Pods, Pods their node), a
// registry that wants its token with the test app pushed to it, and a
// node agent (node.Agent) that talks to the apiserver as its node and
// runs the Pods as runc containers of a sandbox of its own.
//
// Start makes one; its configure functions change the agent's
// node.Options before it starts (the node's registry credentials,
// Keychain, or its capacity). The Fixture hands its tests the control
// plane, an admin clientset, the registry's host and token (PullSecret,
// Keychain), the images pushed (Image, AppImage) and the agent's state
// directory; StopAgent, StartAgent and RestartAgent stop the agent and
// start a new one on the same state directory, port and certificates, as
// a restart of bex-node on its machine does (its containers run on and
// the new agent adopts them; node.Reset removes them at the end).
//
// It is for the tests of node and of what runs on a cluster's nodes (the
// kube runtime driver's); it needs root, runc and the pinned kube
// binaries, and skips the test where the machine cannot run sandboxes
// (sandboxtest.Require).
package nodetest
