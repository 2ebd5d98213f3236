package kube

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
)

// Logs implements runtime.Driver by reading the containers' logs through
// the apiserver (pods/log). Without follow, the last tail lines of every pod
// are merged by time. With follow, the same last tail lines of the app
// first, then each pod's lines as they come; pods that appear later (a new
// release, a restart) are picked up at the next poll.
func (d *Driver) Logs(ctx context.Context, tenant, app string, tail int, follow bool) (<-chan runtime.LogLine, error) {
	ns := d.opts.Namespace(tenant)
	var deps appsv1.DeploymentList
	if err := d.c.List(ctx, &deps, client.InNamespace(ns), appSelector(app)); err != nil {
		return nil, fmt.Errorf("listing deployments: %w", err)
	}
	if len(deps.Items) == 0 {
		return nil, fmt.Errorf("%s/%s: %w", tenant, app, runtime.ErrNotFound)
	}
	pods, err := d.pods(ctx, ns, app)
	if err != nil {
		return nil, err
	}
	out := make(chan runtime.LogLine)
	if !follow {
		var lines []runtime.LogLine
		for _, p := range pods {
			lines = append(lines, d.podTail(ctx, ns, p, tail)...)
		}
		for _, l := range d.systemLines(ctx, ns, pods) {
			lines = append(lines, l.line)
		}
		lines = append(lines, d.keptLogLinesOf(ctx, ns, app, pods)...)
		sort.SliceStable(lines, func(i, j int) bool { return lines[i].Time.Before(lines[j].Time) })
		if tail >= 0 && len(lines) > tail {
			lines = lines[len(lines)-tail:]
		}
		go func() {
			defer close(out)
			for _, l := range lines {
				select {
				case out <- l:
				case <-ctx.Done():
					return
				}
			}
		}()
		return out, nil
	}
	// The first streams are open before Logs returns, so that a line the
	// app writes after that is in them: a kubelet's tailLines counts
	// from when it serves the request.
	opened := make([]*podLog, len(pods))
	for i, p := range pods {
		opened[i], _ = d.openLog(ctx, ns, p, tail, nil)
	}
	go d.follow(ctx, ns, app, tail, pods, opened, out)
	return out, nil
}

// podRef is a pod and the instance it is.
type podRef struct {
	name      string
	container string
	inst      runtime.Instance
	// run is the Pod of a logged run (LabelRunInstance), nil for an
	// instance's: its lines start with the command it runs and end with
	// how it ended, as the process driver's do.
	run *corev1.Pod
	// pod is an instance's Pod as listed, nil for a run's.
	pod *corev1.Pod
}

// pods are the app's instance Pods and its logged runs' (loggedRuns).
func (d *Driver) pods(ctx context.Context, ns, app string) ([]podRef, error) {
	refs, err := d.instancePods(ctx, ns, app)
	if err != nil {
		return nil, err
	}
	runs, err := d.loggedRuns(ctx, ns, app)
	if err != nil {
		return nil, err
	}
	return append(refs, runs...), nil
}

// instancePods are the app's instance Pods, each with the instance it is.
func (d *Driver) instancePods(ctx context.Context, ns, app string) ([]podRef, error) {
	var list corev1.PodList
	if err := d.c.List(ctx, &list, client.InNamespace(ns), appSelector(app)); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	insts := instancesFrom(list.Items) // sorts list.Items the same way
	refs := make([]podRef, len(list.Items))
	for i := range list.Items {
		refs[i] = podRef{name: list.Items[i].Name, container: list.Items[i].Labels[LabelProcess], inst: insts[i], pod: &list.Items[i]}
	}
	return refs, nil
}

// loggedRuns are the Pods of the app's runs whose output goes to its log
// (LabelRunInstance), running or kept after their end.
func (d *Driver) loggedRuns(ctx context.Context, ns, app string) ([]podRef, error) {
	var list corev1.PodList
	if err := d.c.List(ctx, &list, client.InNamespace(ns), runSelector(app), client.HasLabels{LabelRunInstance}); err != nil {
		return nil, fmt.Errorf("listing the pods of runs: %w", err)
	}
	refs := make([]podRef, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		process, index, _ := strings.Cut(p.Labels[LabelRunInstance], ".")
		n, err := strconv.Atoi(index)
		if err != nil {
			continue
		}
		refs = append(refs, podRef{name: p.Name, container: runContainer, inst: runtime.Instance{Process: process, Index: n}, run: p})
	}
	return refs, nil
}

// runStart is the line a logged run's lines start with, at its container's
// start; false before it started.
func runStart(p podRef) (runtime.LogLine, bool) {
	var at time.Time
	for _, cs := range p.run.Status.ContainerStatuses {
		switch {
		case cs.Name != runContainer:
		case cs.State.Running != nil:
			at = cs.State.Running.StartedAt.Time
		case cs.State.Terminated != nil:
			at = cs.State.Terminated.StartedAt.Time
		}
	}
	if at.IsZero() || len(p.run.Spec.Containers) == 0 {
		return runtime.LogLine{}, false
	}
	return p.systemLine(at, "Running "+strings.Join(p.run.Spec.Containers[0].Command, " ")), true
}

// runEnd is the line a logged run's lines end with, once its container
// ended, at its end or after last, the time of its last line.
func runEnd(p podRef, last time.Time) (runtime.LogLine, bool) {
	t := terminated(p.run)
	if t == nil {
		return runtime.LogLine{}, false
	}
	at := t.FinishedAt.Time
	if at.Before(last) {
		at = last
	}
	return p.systemLine(at, fmt.Sprintf("Process exited with status %d", exitCode(t))), true
}

func (p podRef) systemLine(at time.Time, text string) runtime.LogLine {
	return runtime.LogLine{Time: at, Process: p.inst.Process, Instance: p.inst.Index, Stream: runtime.System, Text: text}
}

func (d *Driver) podTail(ctx context.Context, ns string, p podRef, tail int) []runtime.LogLine {
	lines, err := d.tailOf(ctx, ns, p, tail)
	if err != nil {
		return nil
	}
	if p.run == nil {
		return lines
	}
	var first, last time.Time
	if len(lines) > 0 {
		first, last = lines[0].Time, lines[len(lines)-1].Time
	}
	if l, ok := runStart(p); ok {
		if !first.IsZero() && first.Before(l.Time) {
			l.Time = first
		}
		lines = append([]runtime.LogLine{l}, lines...)
	}
	if l, ok := runEnd(p, last); ok {
		lines = append(lines, l)
	}
	return lines
}

// fresh is p with its run's Pod read again; p as it is when that fails.
func (d *Driver) fresh(ctx context.Context, ns string, p podRef) podRef {
	var pod corev1.Pod
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.name}, &pod); err == nil {
		p.run = &pod
	}
	return p
}

// follow streams every pod of the app until ctx ends; opened holds the
// streams of pods already open (nil where opening failed).
func (d *Driver) follow(ctx context.Context, ns, app string, tail int, pods []podRef, opened []*podLog, out chan<- runtime.LogLine) {
	var wg sync.WaitGroup
	defer close(out)
	defer wg.Wait()
	var mu sync.Mutex
	streaming := map[string]bool{}
	since := map[string]streamTimes{}
	// began and ended hold the logged runs whose first and last lines
	// (runStart, runEnd) were sent.
	began, ended := map[string]bool{}, map[string]bool{}
	has := func(seen map[string]bool, name string) bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[name]
	}
	once := func(seen map[string]bool, name string) bool {
		mu.Lock()
		defer mu.Unlock()
		if seen[name] {
			return false
		}
		seen[name] = true
		return true
	}
	start := func(p podRef, tail int, l *podLog) {
		mu.Lock()
		if streaming[p.name] {
			mu.Unlock()
			if l != nil {
				l.Close()
			}
			return
		}
		streaming[p.name] = true
		from := maps.Clone(since[p.name])
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				streaming[p.name] = false
				mu.Unlock()
			}()
			if l == nil {
				var err error
				if l, err = d.openLog(ctx, ns, p, tail, from); err != nil {
					return
				}
			}
			defer l.Close()
			send := func(l runtime.LogLine) bool {
				select {
				case out <- l:
					return true
				case <-ctx.Done():
					return false
				}
			}
			if p.run != nil && !has(began, p.name) {
				if l, ok := runStart(d.fresh(ctx, ns, p)); ok && once(began, p.name) && !send(l) {
					return
				}
			}
			l.read(p, func(line runtime.LogLine) bool {
				mu.Lock()
				if since[p.name] == nil {
					since[p.name] = streamTimes{}
				}
				if line.Time.After(since[p.name][line.Stream]) {
					since[p.name][line.Stream] = line.Time
				}
				mu.Unlock()
				return send(line)
			})
			if p.run != nil && ctx.Err() == nil && !has(ended, p.name) {
				mu.Lock()
				last := since[p.name].last()
				mu.Unlock()
				if l, ok := runEnd(d.fresh(ctx, ns, p), last); ok && once(ended, p.name) {
					send(l)
				}
			}
		})
	}
	// sendLast sends the last tail of lines (all when tail is negative),
	// false once ctx ended.
	sendLast := func(lines []runtime.LogLine, tail int) bool {
		if tail >= 0 && len(lines) > tail {
			lines = lines[len(lines)-tail:]
		}
		for _, l := range lines {
			select {
			case out <- l:
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	// The last tail of what there is now, in the order it was written:
	// the kept lines of replaced Pods, each Pod's last lines (a run's
	// after its start) and the platform's lines; then each Pod's new
	// lines as they come, and the platform's as a poll finds them.
	initial := d.keptLogLinesOf(ctx, ns, app, pods)
	for i, p := range pods {
		l := opened[i]
		if l == nil {
			continue
		}
		lines := l.first
		l.first = nil
		if p.run != nil {
			if s, ok := runStart(p); ok {
				if len(lines) > 0 && lines[0].Time.Before(s.Time) {
					s.Time = lines[0].Time
				}
				began[p.name] = true
				initial = append(initial, s)
			}
		}
		initial = append(initial, lines...)
		times := streamTimes{}
		for _, line := range lines {
			if line.Time.After(times[line.Stream]) {
				times[line.Stream] = line.Time
			}
		}
		since[p.name] = times
	}
	sent := map[string]bool{}
	for _, l := range d.systemLines(ctx, ns, pods) {
		sent[l.key] = true
		initial = append(initial, l.line)
	}
	sort.SliceStable(initial, func(i, j int) bool { return initial[i].Time.Before(initial[j].Time) })
	if !sendLast(initial, tail) {
		for _, l := range opened {
			if l != nil {
				l.Close()
			}
		}
		return
	}
	for i, p := range pods {
		start(p, tail, opened[i])
	}
	// The platform's new lines, as a poll finds them.
	system := func(pods []podRef) bool {
		var fresh []runtime.LogLine
		for _, l := range d.systemLines(ctx, ns, pods) {
			if !sent[l.key] {
				sent[l.key] = true
				fresh = append(fresh, l.line)
			}
		}
		return sendLast(fresh, -1)
	}
	poll := max(2*d.opts.PollInterval, time.Second)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pods, err := d.pods(ctx, ns, app)
		if err != nil {
			continue
		}
		for _, p := range pods {
			// A pod seen for the first time starts from its beginning.
			start(p, -1, nil)
		}
		if !system(pods) {
			return
		}
	}
}

// keyedLine is a line of the platform's about an instance, and what
// tells it from another (an Event and its count, a Pod's readiness since a
// time).
type keyedLine struct {
	key  string
	line runtime.LogLine
}

// systemLines are the platform's lines (stream bex) about the app's
// instances, as the process runtime writes its own (started, healthy,
// unhealthy, stopping), from what the cluster says of their Pods, oldest
// first: the Events of each (the scheduler's and the node's: assigned,
// started, a probe failed, stopping, back-off; one line per Event at its
// last time, with how many times when more than once), and when each
// became ready ("Healthy"). Events the cluster no longer keeps (an hour by
// default) are not there; what cannot be read is left out.
func (d *Driver) systemLines(ctx context.Context, ns string, pods []podRef) []keyedLine {
	byUID := map[string]podRef{}
	var lines []keyedLine
	for _, p := range pods {
		if p.pod == nil {
			continue
		}
		byUID[string(p.pod.UID)] = p
		for _, c := range p.pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
				at := c.LastTransitionTime.Time
				lines = append(lines, keyedLine{key: fmt.Sprintf("ready/%s/%d", p.pod.UID, at.UnixNano()),
					line: p.systemLine(at, "Healthy: ready to serve")})
			}
		}
	}
	if len(byUID) > 0 {
		var events corev1.EventList
		if err := d.c.List(ctx, &events, client.InNamespace(ns), client.MatchingFields{"involvedObject.kind": "Pod"}); err == nil {
			for i := range events.Items {
				e := &events.Items[i]
				p, ok := byUID[string(e.InvolvedObject.UID)]
				if !ok {
					continue
				}
				text := e.Message
				if e.Reason == "Unhealthy" {
					text = "Unhealthy: " + text
				}
				if e.Count > 1 {
					text += fmt.Sprintf(" (%d times)", e.Count)
				}
				lines = append(lines, keyedLine{key: fmt.Sprintf("event/%s/%d", e.UID, e.Count), line: p.systemLine(eventTime(e), text)})
			}
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].line.Time.Before(lines[j].line.Time) })
	return lines
}

// readLines parses "<RFC3339Nano time> <text>" lines of stream until r
// ends or emit returns false.
func readLines(r io.Reader, p podRef, stream string, emit func(runtime.LogLine) bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		ts, text, _ := strings.Cut(line, " ")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t, text = time.Now(), line
		}
		if !emit(runtime.LogLine{Time: t, Process: p.inst.Process, Instance: p.inst.Index, Stream: stream, Text: text}) {
			return
		}
	}
}
