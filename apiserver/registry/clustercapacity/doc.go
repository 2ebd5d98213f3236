// Package clustercapacity is the read-only REST storage of ClusterCapacity:
// get, list and watch, computed from the scheduler's view of the fleet
// (and the Placements on it) when the view tells of a change, with a
// resourceVersion per change of a cluster, a bounded history of changes
// for watches that resume, and a table for kubectl. Nothing is stored.
package clustercapacity
