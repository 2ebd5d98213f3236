// Package every runs a step at a fixed period in a loop that outlives a
// panic in the step: the loop is started again a bounded number of times,
// each panic logged, before it gives up.
package every
