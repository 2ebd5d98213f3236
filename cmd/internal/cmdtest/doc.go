// Package cmdtest runs the cluster deployment's commands (bex-web, bex-git,
// bex-controller-manager) as processes in tests: built with go build, given
// free loopback ports, their output kept for the failure message, and
// interrupted at the end of the test.
package cmdtest
