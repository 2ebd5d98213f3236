// Package app is the bex-node command: its flags, and the wiring of a
// node.Agent to the cluster's apiserver (the node's kubeconfig), a sandbox
// slot of this machine and the node's registry credentials.
package app
