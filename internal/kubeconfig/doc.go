// Package kubeconfig loads the client configuration a bex command uses to
// reach a cluster: a kubeconfig file when one is given, else the
// in-cluster service account. It also writes a client configuration as a
// kubeconfig file, for the processes bex starts (a local machine's node
// agent and control-plane components).
package kubeconfig
