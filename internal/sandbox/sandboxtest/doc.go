// Package sandboxtest gives tests a sandbox Manager of their own (skipped
// where the machine cannot run sandboxes, except in CI, where that fails),
// the probe binary that plays the hostile tenant inside containers, and
// the limits a running container's cgroup holds it to (ContainerLimits).
package sandboxtest
