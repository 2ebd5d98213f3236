// Package bench holds scripted measurements that print figures: each
// subdirectory is a program run with go run (see docs/perf.md). The
// package itself has what they share (StartCPUProfile, Parallel, LoadAverage, RSS).
package bench
