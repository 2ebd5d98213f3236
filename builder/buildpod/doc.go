// Package buildpod places a build's steps in a Pod of the tenant's on the
// workload cluster: it is build.Options.Remote for a cluster install. Each
// build gets a Pod of its own (internal/runtime/kube's StartBuild: the
// builder image, no service-account token, restricted Pod Security, the
// build's time limit as its deadline) whose agent (builder/buildagent) the
// builder then speaks to; the Pod and its Secret are deleted when the
// build's tree came back or the build failed.
package buildpod
