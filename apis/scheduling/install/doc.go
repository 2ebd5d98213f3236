// Package install registers the scheduling.bex.co API group — the internal
// types and v1alpha1 with its conversions and defaults — with a scheme, for
// bex-apiserver.
package install
