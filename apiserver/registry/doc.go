// Package registry holds what bex-apiserver's REST storages share; the
// storages themselves are its subpackages: placement (stored in etcd through
// the generic registry), clustercapacity (computed on read) and
// placementreview (computed on create, never stored).
package registry
