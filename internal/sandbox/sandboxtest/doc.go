// Package sandboxtest gives tests a sandbox Manager of their own (skipped
// where the machine cannot run sandboxes, except in CI, where that fails)
// and the probe binary that plays the hostile tenant inside containers.
package sandboxtest
