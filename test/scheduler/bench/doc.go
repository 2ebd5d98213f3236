// Command bench measures bex-apiserver with a fleet of 100 clusters and
// 10,000 placements: PlacementReview throughput (reviews that list every
// candidate, and reviews that ask for the verdict alone as the App
// controller does) and ClusterCapacity list latency, through the
// kube-apiserver's aggregator and directly, with the CPU time each process
// spent per review, and prints the ratios (what the aggregator costs). Run
// it with
//
//	go run ./test/scheduler/bench [--profile DIR]
package main
