package kube

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
)

// Logs implements runtime.Driver by reading the containers' logs through
// the apiserver (pods/log). Without follow, the last tail lines of every pod
// are merged by time. With follow, each pod's stream is sent as it comes,
// and pods that appear later (a new release, a restart) are picked up at the
// next poll.
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
	opened := make([]io.ReadCloser, len(pods))
	for i, p := range pods {
		opened[i], _ = d.followStream(ctx, ns, p, tail, time.Time{})
	}
	go d.follow(ctx, ns, app, tail, pods, opened, out)
	return out, nil
}

// podRef is a pod and the instance it is.
type podRef struct {
	name      string
	container string
	inst      runtime.Instance
}

func (d *Driver) pods(ctx context.Context, ns, app string) ([]podRef, error) {
	var list corev1.PodList
	if err := d.c.List(ctx, &list, client.InNamespace(ns), appSelector(app)); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	insts := instancesFrom(list.Items) // sorts list.Items the same way
	refs := make([]podRef, len(list.Items))
	for i := range list.Items {
		refs[i] = podRef{name: list.Items[i].Name, container: list.Items[i].Labels[LabelProcess], inst: insts[i]}
	}
	return refs, nil
}

func (d *Driver) podTail(ctx context.Context, ns string, p podRef, tail int) []runtime.LogLine {
	opts := &corev1.PodLogOptions{Container: p.container, Timestamps: true}
	if tail >= 0 {
		n := int64(tail)
		opts.TailLines = &n
	}
	rc, err := d.cs.CoreV1().Pods(ns).GetLogs(p.name, opts).Stream(ctx)
	if err != nil {
		return nil
	}
	defer rc.Close()
	var lines []runtime.LogLine
	readLines(rc, p, func(l runtime.LogLine) bool { lines = append(lines, l); return true })
	return lines
}

// followStream opens the followed log of p: its last tail lines (all when
// negative), or the lines after from when set.
func (d *Driver) followStream(ctx context.Context, ns string, p podRef, tail int, from time.Time) (io.ReadCloser, error) {
	opts := &corev1.PodLogOptions{Container: p.container, Timestamps: true, Follow: true}
	switch {
	case !from.IsZero():
		t := metav1.NewTime(from.Add(time.Nanosecond))
		opts.SinceTime = &t
	case tail >= 0:
		n := int64(tail)
		opts.TailLines = &n
	}
	return d.cs.CoreV1().Pods(ns).GetLogs(p.name, opts).Stream(ctx)
}

// follow streams every pod of the app until ctx ends; opened holds the
// streams of pods already open (nil where opening failed).
func (d *Driver) follow(ctx context.Context, ns, app string, tail int, pods []podRef, opened []io.ReadCloser, out chan<- runtime.LogLine) {
	var wg sync.WaitGroup
	defer close(out)
	defer wg.Wait()
	var mu sync.Mutex
	streaming := map[string]bool{}
	since := map[string]time.Time{}
	start := func(p podRef, tail int, rc io.ReadCloser) {
		mu.Lock()
		if streaming[p.name] {
			mu.Unlock()
			if rc != nil {
				rc.Close()
			}
			return
		}
		streaming[p.name] = true
		from := since[p.name]
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				streaming[p.name] = false
				mu.Unlock()
			}()
			if rc == nil {
				var err error
				if rc, err = d.followStream(ctx, ns, p, tail, from); err != nil {
					return
				}
			}
			defer rc.Close()
			readLines(rc, p, func(l runtime.LogLine) bool {
				mu.Lock()
				since[p.name] = l.Time
				mu.Unlock()
				select {
				case out <- l:
					return true
				case <-ctx.Done():
					return false
				}
			})
		})
	}
	for i, p := range pods {
		start(p, tail, opened[i])
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
	}
}

// readLines parses "<RFC3339Nano time> <text>" lines until r ends or emit
// returns false.
func readLines(r io.Reader, p podRef, emit func(runtime.LogLine) bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		ts, text, _ := strings.Cut(line, " ")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t, text = time.Now(), line
		}
		if !emit(runtime.LogLine{Time: t, Process: p.inst.Process, Instance: p.inst.Index, Stream: runtime.Stdout, Text: text}) {
			return
		}
	}
}
