// Package clustercapacity is the read-only REST storage of ClusterCapacity:
// get and list, computed on each request from the scheduler's view of the
// fleet, with a table for kubectl. Nothing is stored.
package clustercapacity
