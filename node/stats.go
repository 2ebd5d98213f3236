package node

import (
	"encoding/json"
	"net/http"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// serveSummary serves /stats/summary, the subset of the kubelet's Summary
// API that metrics-server and the kube driver read: the node's name and,
// for each Pod whose container runs now, the container's and the Pod's
// CPU time (usageCoreNanoSeconds) and memory (usageBytes,
// workingSetBytes, availableBytes under a memory limit), read from the
// container's cgroup at the request. A Pod whose container does not run
// (pulling, in back-off, finished) is left out, as the kubelet leaves out
// a container that does not exist. The Pod's figures are its one
// container's.
func (a *Agent) serveSummary(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(a.summary())
}

func (a *Agent) summary() statsv1alpha1.Summary {
	a.mu.Lock()
	workers := make([]*podWorker, 0, len(a.workers))
	for _, w := range a.workers {
		workers = append(workers, w)
	}
	a.mu.Unlock()
	s := statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: a.opts.NodeName}, Pods: []statsv1alpha1.PodStats{}}
	for _, w := range workers {
		if ps, ok := w.stats(); ok {
			s.Pods = append(s.Pods, ps)
		}
	}
	sort.Slice(s.Pods, func(i, j int) bool {
		a, b := s.Pods[i].PodRef, s.Pods[j].PodRef
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return s
}

// stats reads the stats of the worker's Pod; ok is false when its
// container does not run.
func (w *podWorker) stats() (statsv1alpha1.PodStats, bool) {
	w.mu.Lock()
	pod, st, c := w.latest, w.st, w.container
	w.mu.Unlock()
	if c == nil || st.running == nil || st.startTime == nil || len(pod.Spec.Containers) == 0 {
		return statsv1alpha1.PodStats{}, false
	}
	u, err := c.Stats()
	if err != nil {
		return statsv1alpha1.PodStats{}, false // it stopped since
	}
	now := metav1.Now()
	cpu := func() *statsv1alpha1.CPUStats {
		return &statsv1alpha1.CPUStats{Time: now, UsageCoreNanoSeconds: &u.CPUNanoseconds}
	}
	memory := func() *statsv1alpha1.MemoryStats {
		m := &statsv1alpha1.MemoryStats{Time: now, UsageBytes: &u.MemoryBytes, WorkingSetBytes: &u.WorkingSetBytes}
		if limit := c.MemoryLimit(); limit > 0 {
			avail := uint64(0)
			if uint64(limit) > u.WorkingSetBytes {
				avail = uint64(limit) - u.WorkingSetBytes
			}
			m.AvailableBytes = &avail
		}
		return m
	}
	return statsv1alpha1.PodStats{
		PodRef:    statsv1alpha1.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)},
		StartTime: *st.startTime,
		Containers: []statsv1alpha1.ContainerStats{{
			Name: pod.Spec.Containers[0].Name, StartTime: st.running.StartedAt,
			CPU: cpu(), Memory: memory(),
		}},
		CPU: cpu(), Memory: memory(),
	}, true
}
