package kube

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"bex.co/bex/internal/runtime"
)

// A container's log merges its stdout and stderr unless the cluster serves
// them apart: PodLogOptions.stream, behind the PodLogsQuerySplitStreams
// feature gate (alpha since Kubernetes 1.32, off by default) on the
// apiservers and on the nodes, and never with tailLines. Where the cluster
// serves them, the driver reads a tail from the merged log and tells its
// stderr lines by reading that stream apart (markStderr), and follows each
// stream on its own. Where the cluster refuses (the apiserver: 422, stream
// "may not be specified"; a kubelet: 400, "Please enable
// PodLogsQuerySplitStreams"), every line is stdout, and the driver asks
// again after splitRetry: a cluster's gate may be turned on by a rollout.
const splitRetry = 10 * time.Minute

// streamGate is what the driver knows of its cluster's split streams.
type streamGate struct {
	mu  sync.Mutex
	off time.Time // not asked for until then
}

// splitStreams reports whether the driver asks for a container's streams
// apart: until the cluster refused, and again splitRetry after.
func (d *Driver) splitStreams() bool {
	d.streams.mu.Lock()
	defer d.streams.mu.Unlock()
	return !time.Now().Before(d.streams.off)
}

// refusedStream reports whether err is the cluster's refusal of a stream
// asked for apart, and then stops asking for splitRetry.
func (d *Driver) refusedStream(err error) bool {
	if err == nil || !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "stream") {
		return false
	}
	d.streams.mu.Lock()
	d.streams.off = time.Now().Add(splitRetry)
	d.streams.mu.Unlock()
	return true
}

// lineKey tells a line of a container's log from another: its time, as
// the node stamped it, and its text.
type lineKey struct {
	at   int64
	text string
}

func keyOf(l runtime.LogLine) lineKey { return lineKey{l.Time.UnixNano(), l.Text} }

// tailOf returns the last tail lines of p's log (all when negative), each
// with its stream where the cluster serves them apart.
func (d *Driver) tailOf(ctx context.Context, ns string, p podRef, tail int) ([]runtime.LogLine, error) {
	opts := &corev1.PodLogOptions{Container: p.container, Timestamps: true}
	if tail >= 0 {
		opts.TailLines = new(int64(tail))
	}
	rc, err := d.cs.CoreV1().Pods(ns).GetLogs(p.name, opts).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var lines []runtime.LogLine
	readLines(rc, p, runtime.Stdout, func(l runtime.LogLine) bool { lines = append(lines, l); return true })
	d.markStderr(ctx, ns, p, lines)
	return lines, nil
}

// markStderr sets the stream of those lines, read from p's merged log,
// that its stderr has: it reads that stream from the second of the first
// line (sinceTime has seconds only) and keeps only what it looks for.
func (d *Driver) markStderr(ctx context.Context, ns string, p podRef, lines []runtime.LogLine) {
	if len(lines) == 0 || !d.splitStreams() {
		return
	}
	at := make(map[lineKey][]int, len(lines))
	for i, l := range lines {
		at[keyOf(l)] = append(at[keyOf(l)], i)
	}
	since := metav1.NewTime(lines[0].Time)
	rc, err := d.cs.CoreV1().Pods(ns).GetLogs(p.name, &corev1.PodLogOptions{
		Container: p.container, Timestamps: true, SinceTime: &since, Stream: new(corev1.LogStreamStderr),
	}).Stream(ctx)
	if err != nil {
		d.refusedStream(err)
		return
	}
	defer rc.Close()
	readLines(rc, p, runtime.Stderr, func(l runtime.LogLine) bool {
		for _, i := range at[keyOf(l)] {
			lines[i].Stream = runtime.Stderr
		}
		return true
	})
}

// podLog is the followed log of a pod: the lines it sends first, then
// those of its streams as they come.
type podLog struct {
	first []runtime.LogLine
	srcs  []logSource
}

// logSource is one followed stream of a pod's log.
type logSource struct {
	rc     io.ReadCloser
	stream string    // the stream its lines are (stdout for a merged one)
	after  time.Time // its lines not after it were sent already
}

// streamTimes are the times of the last lines sent of each stream of a
// pod's log.
type streamTimes map[string]time.Time

// last is the latest of them.
func (s streamTimes) last() time.Time {
	var t time.Time
	for _, at := range s {
		if at.After(t) {
			t = at
		}
	}
	return t
}

// openLog opens p's followed log: its last tail lines (all when negative)
// when from is empty, else the lines of each stream after from's time of
// it. The tail is read first (tailOf), as the log's first lines, and the
// streams are followed from its last line: apart where the cluster serves
// stdout and stderr apart, else the merged log, every line stdout.
func (d *Driver) openLog(ctx context.Context, ns string, p podRef, tail int, from streamTimes) (*podLog, error) {
	l := &podLog{}
	after := streamTimes{}
	for _, stream := range []string{runtime.Stdout, runtime.Stderr} {
		// A stream without a line sent starts after the last line of
		// the other: those before it came.
		after[stream] = from[stream]
		if after[stream].IsZero() {
			after[stream] = from.last()
		}
	}
	if len(from) == 0 && tail >= 0 {
		// The last line, sent or not, is where the streams start.
		lines, err := d.tailOf(ctx, ns, p, max(tail, 1))
		if err != nil {
			return nil, err
		}
		if n := len(lines); n > 0 {
			after[runtime.Stdout], after[runtime.Stderr] = lines[n-1].Time, lines[n-1].Time
			l.first = lines[n-min(tail, n):]
		}
	}
	// follow adds the stream the cluster calls stream (All: the merged
	// log), whose lines are of the driver's stream as, from after on
	// (sinceTime has seconds only: the lines of that second come again,
	// and read drops them).
	follow := func(stream, as string, after time.Time) error {
		rc, err := d.followLog(ctx, ns, p.name, p.container, stream, true, after)
		if err != nil {
			return err
		}
		l.srcs = append(l.srcs, logSource{rc: rc, stream: as, after: after})
		return nil
	}
	if d.splitStreams() {
		err := follow(corev1.LogStreamStdout, runtime.Stdout, after[runtime.Stdout])
		if err == nil {
			err = follow(corev1.LogStreamStderr, runtime.Stderr, after[runtime.Stderr])
		}
		if err == nil {
			return l, nil
		}
		l.Close()
		l.srcs = nil
		if !d.refusedStream(err) {
			return nil, err
		}
	}
	if err := follow(corev1.LogStreamAll, runtime.Stdout, after.last()); err != nil {
		return nil, err
	}
	return l, nil
}

// followLog opens the followed log of a pod's container: one stream of it
// (All: both, merged), with or without each line's time, from its start
// or from since (in seconds).
func (d *Driver) followLog(ctx context.Context, ns, pod, container, stream string, timestamps bool, since time.Time) (io.ReadCloser, error) {
	opts := &corev1.PodLogOptions{Container: container, Timestamps: timestamps, Follow: true}
	if stream != corev1.LogStreamAll {
		opts.Stream = &stream
	}
	if !since.IsZero() {
		opts.SinceTime = new(metav1.NewTime(since))
	}
	return d.cs.CoreV1().Pods(ns).GetLogs(pod, opts).Stream(ctx)
}

// read sends the log's lines to emit, its first ones, then each stream's
// as they come, until every stream ended or emit returned false. emit is
// called from one goroutine at a time.
func (l *podLog) read(p podRef, emit func(runtime.LogLine) bool) {
	for _, line := range l.first {
		if !emit(line) {
			return
		}
	}
	var mu sync.Mutex
	stopped := false
	var wg sync.WaitGroup
	for _, s := range l.srcs {
		wg.Go(func() {
			readLines(s.rc, p, s.stream, func(line runtime.LogLine) bool {
				if !s.after.IsZero() && !line.Time.After(s.after) {
					return true
				}
				mu.Lock()
				defer mu.Unlock()
				if stopped || !emit(line) {
					stopped = true
					return false
				}
				return true
			})
			mu.Lock()
			stop := stopped
			mu.Unlock()
			if stop {
				// The other streams' reads end with their bodies.
				l.Close()
			}
		})
	}
	wg.Wait()
}

// Close closes the log's streams.
func (l *podLog) Close() {
	for _, s := range l.srcs {
		s.rc.Close()
	}
}
