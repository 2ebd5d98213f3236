// Package buildagent runs one build's steps where the builder placed them,
// away from the platform: in a Pod of the tenant in a cluster install (see
// internal/runtime/kube's BuildPod), which holds no service-account token,
// no platform file and no other tenant's tree.
//
// The agent (cmd/bex-build-agent, Handler) serves three calls over HTTP,
// each with the build's bearer token: PUT /tree takes the checkout as a tar
// stream into Paths.App, POST /run runs one command there with the
// environment it is given and streams its output back (stdout and stderr
// merged) with its exit status in the Bex-Exit trailer, and GET /tree sends
// the tree back once the steps are done. GET /healthz answers without a
// token, for the Pod's readiness probe.
//
// The agent ends itself when its builder is gone (ServeOptions.IdleTimeout,
// Agent.WaitIdle): a step whose call is cut is killed with its process
// group, and once no call has been in flight for the idle limit the agent
// exits saying so, long before the Pod's deadline.
//
// The builder (builder/build, Options.Remote) speaks to it with Client.
// Whatever comes back is the tenant's: the builder extracts the tree through
// an os.Root with limits (internal/treetar) and reads it as it reads a
// checkout. The agent itself runs as the tenant's code does and trusts
// nothing of it either: a step may kill it, and then the build fails.
package buildagent
