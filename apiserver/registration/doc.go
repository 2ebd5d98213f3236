// Package registration registers a running bex-apiserver with a
// kube-apiserver: its namespace, the Service the aggregator resolves (an
// ExternalName Service when bex-apiserver runs beside the kube-apiserver
// rather than in a pod), the APIService v1alpha1.scheduling.bex.co with the
// serving certificate's CA, and the RBAC bex-apiserver's own identity needs
// (delegated authentication and authorization, reading the fleet, admission).
// It also makes the serving certificate the aggregator verifies, for the name
// <service>.<namespace>.svc.
package registration
