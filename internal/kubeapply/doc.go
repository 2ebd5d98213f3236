// Package kubeapply installs bex's own objects into a cluster: the platform's
// CustomResourceDefinitions, applied server-side, waited on until the
// apiserver reports them Established and serves them.
package kubeapply
