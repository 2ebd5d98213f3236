package appmetrics

import (
	"math"
	"time"
)

// Latency buckets: bucket i holds durations up to bucketBase·bucketGrowth^i,
// from 0.5 ms to about 80 s; the last bucket holds everything longer. A
// quantile read from them is the upper bound of its bucket: at most 25%
// above the true value.
const (
	bucketBase   = 0.0005
	bucketGrowth = 1.25
	bucketCount  = 56
)

// histogram counts one app's requests: one interval's (the Sampler's
// current interval, an EdgeReader's differences) or, in Totals, all since
// the process started.
type histogram struct {
	requests, errors uint64
	buckets          [bucketCount]uint64
}

func (h *histogram) observe(status int, d time.Duration) {
	h.requests++
	if status >= 500 {
		h.errors++
	}
	h.buckets[bucketOf(d.Seconds())]++
}

// add counts o's requests into h.
func (h *histogram) add(o histogram) {
	h.requests += o.requests
	h.errors += o.errors
	for i, n := range o.buckets {
		h.buckets[i] += n
	}
}

// minus is h less p; false when any count of p is above h's (an edge
// counted the app again from zero).
func (h histogram) minus(p histogram) (histogram, bool) {
	if p.requests > h.requests || p.errors > h.errors {
		return histogram{}, false
	}
	d := histogram{requests: h.requests - p.requests, errors: h.errors - p.errors}
	for i := range h.buckets {
		if p.buckets[i] > h.buckets[i] {
			return histogram{}, false
		}
		d.buckets[i] = h.buckets[i] - p.buckets[i]
	}
	return d, true
}

// bucketOf is the bucket of a duration of secs seconds.
func bucketOf(secs float64) int {
	if secs <= bucketBase {
		return 0
	}
	i := int(math.Ceil(math.Log(secs/bucketBase) / math.Log(bucketGrowth)))
	return min(i, bucketCount-1)
}

// upper is the upper bound of bucket i, in seconds.
func upper(i int) float64 { return bucketUppers[i] }

// bucketUppers holds each bucket's upper bound, computed once: it is read
// for every quantile and every saved latency.
var bucketUppers = func() (b [bucketCount]float64) {
	for i := range b {
		b[i] = bucketBase * math.Pow(bucketGrowth, float64(i))
	}
	return b
}()

// quantile returns the q-quantile (0 < q ≤ 1) of the interval's durations,
// in seconds; false without requests.
func (h *histogram) quantile(q float64) (float64, bool) {
	var n uint64
	for _, c := range h.buckets {
		n += c
	}
	if n == 0 {
		return 0, false
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i, c := range h.buckets {
		seen += c
		if seen >= rank {
			return upper(i), true
		}
	}
	return upper(bucketCount - 1), true
}
