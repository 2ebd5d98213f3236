package kube

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"bex.co/bex/internal/runtime"
)

func TestRollout(t *testing.T) {
	two := int32(2)
	dep := func(gen, observed int64, st appsv1.DeploymentStatus) *appsv1.Deployment {
		st.ObservedGeneration = observed
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: &two}, Status: st}
	}
	for _, tc := range []struct {
		name         string
		dep          *appsv1.Deployment
		done         bool
		failed, prog string
	}{
		{"spec not observed", dep(3, 2, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}), false, "", "waiting for the new spec to be observed"},
		{"surging", dep(3, 3, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2}), false, "", "1 of 2 new instances started"},
		{"old ones stopping", dep(3, 3, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 2, AvailableReplicas: 2}), false, "", "1 old instances stopping"},
		{"not available", dep(3, 3, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 1}), false, "", "1 of 2 new instances available"},
		{"done", dep(3, 3, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}), true, "", "2 of 2 instances available"},
		{"deadline", dep(3, 3, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "x" has timed out progressing.`},
		}}), false, `did not become ready in time (1 of 2 new instances available): ReplicaSet "x" has timed out progressing.`, ""},
	} {
		r := rollout(tc.dep)
		if r.done != tc.done || r.failed != tc.failed || (tc.prog != "" && r.progress != tc.prog) {
			t.Errorf("%s: got %+v, want done %v failed %q progress %q", tc.name, r, tc.done, tc.failed, tc.prog)
		}
	}
}

func TestPodState(t *testing.T) {
	long := metav1.NewTime(time.Now().Add(-time.Hour))
	pod := func(phase corev1.PodPhase, ready corev1.ConditionStatus, cs corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{
			Phase:             phase,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}},
			ContainerStatuses: []corev1.ContainerStatus{cs},
		}}
	}
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}
	runningLong := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: long}}}
	crashLoop := corev1.ContainerStatus{
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, FinishedAt: long}},
	}
	deleting := pod(corev1.PodRunning, corev1.ConditionTrue, running)
	deleting.DeletionTimestamp = &long
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want runtime.InstanceState
	}{
		{"ready", pod(corev1.PodRunning, corev1.ConditionTrue, running), runtime.Running},
		{"starting", pod(corev1.PodRunning, corev1.ConditionFalse, running), runtime.Starting},
		{"pending", pod(corev1.PodPending, corev1.ConditionFalse, corev1.ContainerStatus{}), runtime.Starting},
		{"failing its probe", pod(corev1.PodRunning, corev1.ConditionFalse, runningLong), runtime.Unhealthy},
		{"crash loop", pod(corev1.PodRunning, corev1.ConditionFalse, crashLoop), runtime.Crashed},
		{"failed", pod(corev1.PodFailed, corev1.ConditionFalse, corev1.ContainerStatus{}), runtime.Crashed},
		{"deleting", deleting, runtime.Stopped},
	} {
		if got, _ := podState(tc.pod); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestPodSince: a ready pod is up since it became ready, or since its
// container last started when that is later: a crash and its restart
// between two status updates leave the Ready condition as it was.
func TestPodSince(t *testing.T) {
	readyAt := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	pod := func(started metav1.Time, restarts int32) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: readyAt}},
			ContainerStatuses: []corev1.ContainerStatus{{Ready: true, RestartCount: restarts,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}},
		}}
	}
	startedBefore := metav1.NewTime(readyAt.Add(-2 * time.Second))
	restarted := metav1.NewTime(readyAt.Add(time.Hour))
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want time.Time
	}{
		{"became ready after it started", pod(startedBefore, 0), readyAt.Time},
		{"restarted while ready", pod(restarted, 1), restarted.Time},
	} {
		state, since := podState(tc.pod)
		if state != runtime.Running || !since.Equal(tc.want) {
			t.Errorf("%s: %s since %s, want Running since %s", tc.name, state, since, tc.want)
		}
	}
}

func TestInstanceIndexes(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Unix(1000+int64(s), 0)) }
	pod := func(name, process, release string, created int) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(created), Labels: map[string]string{LabelProcess: process, LabelRelease: release}}}
	}
	got := instancesFrom([]corev1.Pod{
		pod("w-b", "web", "2", 5), pod("w-a", "web", "2", 5), pod("old", "web", "1", 1), pod("wk", "worker", "2", 3),
	})
	var names []string
	for _, i := range got {
		names = append(names, i.Name()+"@"+string(rune('0'+i.Release)))
	}
	want := []string{"web.0@1", "worker.0@2", "web.0@2", "web.1@2"}
	if len(names) != len(want) {
		t.Fatalf("%v", names)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Errorf("instances %v, want %v", names, want)
			break
		}
	}
}
