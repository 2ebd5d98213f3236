package appmetrics

import (
	"reflect"
	"testing"
	"time"
)

// TestEncodePointsReusesItsBuffer: points encode into a buffer the caller
// reuses, with no allocation once it has room, and decode back to what
// was encoded even when a longer series was encoded there before.
func TestEncodePointsReusesItsBuffer(t *testing.T) {
	interval := 10 * time.Second
	t0 := time.UnixMilli(time.Date(2026, 12, 4, 23, 0, 0, 0, time.UTC).UnixMilli())
	series := func(n int) []Point {
		points := make([]Point, n)
		for i := range points {
			cpu, mem, p50, p99 := 0.25*float64(i), int64(100<<20+i), upper(i%bucketCount), 0.0123
			points[i] = Point{Time: t0.Add(time.Duration(i)*interval + time.Duration(i%4)*time.Millisecond),
				Instances: 2, Restarts: i % 3, Requests: uint64(i * 7), Errors: uint64(i % 2)}
			if i%5 != 0 {
				points[i].CPUCores, points[i].MemoryBytes, points[i].P50Seconds, points[i].P99Seconds = &cpu, &mem, &p50, &p99
			}
		}
		return points
	}
	long, short := series(360), series(12)
	buf := encodePoints(nil, long, interval)
	buf = encodePoints(buf[:0], short, interval)
	got, err := decodePoints(buf, interval)
	if err != nil || !reflect.DeepEqual(got, short) {
		t.Errorf("decoded after reuse = %d points, %v; want the %d points encoded", len(got), err, len(short))
	}
	if allocs := testing.AllocsPerRun(10, func() { buf = encodePoints(buf[:0], long, interval) }); allocs != 0 {
		t.Errorf("encodePoints of %d points into a buffer with room: %.0f allocations, want 0", len(long), allocs)
	}
	if got, err := decodePoints(buf, interval); err != nil || !reflect.DeepEqual(got, long) {
		t.Errorf("decoded = %d points, %v; want the %d points encoded", len(got), err, len(long))
	}
}
