// Command bench measures bex-apiserver with a fleet of 100 clusters and
// 10,000 placements: PlacementReview throughput and ClusterCapacity list
// latency, through the kube-apiserver's aggregator and directly, and prints
// the ratio (what the aggregator costs). Run it with
//
//	go run ./test/scheduler/bench
package main
