// Package kubeconfig loads the client configuration a bex command uses to
// reach a cluster: a kubeconfig file when one is given, else the
// in-cluster service account.
package kubeconfig
