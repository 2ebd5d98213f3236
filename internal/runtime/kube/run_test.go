package kube

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestRunPodName: a run's Pod name is a DNS label of at most 63
// characters that starts with the app, whatever the command's name.
func TestRunPodName(t *testing.T) {
	long := strings.Repeat("a", 50)
	for _, tc := range []struct{ app, name, prefix string }{
		{"shop", "run", "shop-run-"},
		{"shop", "run.3", "shop-run-3-"},
		{"shop", "release", "shop-release-"},
		{"shop", "", "shop-run-"},
		{"shop", "..Ünïcode/../", "shop-n-code-"},
		{long, "release", long + "-relea"},
	} {
		got := runPodName(tc.app, tc.name)
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 || !strings.HasPrefix(got, tc.prefix) {
			t.Errorf("runPodName(%q, %q) = %q (%v), want a DNS label starting %q", tc.app, tc.name, got, errs, tc.prefix)
		}
		if regexp.MustCompile(`-[a-z0-9]{5}$`).FindString(got) == "" {
			t.Errorf("runPodName(%q, %q) = %q, want a random suffix", tc.app, tc.name, got)
		}
	}
	if a, b := runPodName("shop", "run"), runPodName("shop", "run"); a == b {
		t.Errorf("two runs got the same name %q", a)
	}
}

// TestStartOf: a run's Pod has started once its container runs or ran; a
// container that waits to be pulled or created, or a Pod that failed
// before it ran, will not start; an unschedulable Pod, or a container
// whose node cannot read its Secret yet, waits, saying why.
func TestStartOf(t *testing.T) {
	waiting := func(reason, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: runContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
		}}}}
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		started bool
		fatal   bool
		why     string
	}{
		{"pending", &corev1.Pod{}, false, false, ""},
		{"creating", waiting("ContainerCreating", ""), false, false, ""},
		{"running", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: runContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}, true, false, ""},
		{"ran", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
			Name: runContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}}}, true, false, ""},
		{"image pull", waiting("ErrImagePull", `pulling image "x": not found`), false, true, `ErrImagePull: pulling image "x": not found`},
		{"config", waiting("CreateContainerConfigError", "secret not found"), false, false, "CreateContainerConfigError: secret not found"},
		{"create", waiting("CreateContainerError", "no such file"), false, true, "CreateContainerError: no such file"},
		{"refused", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Unsupported", Message: "bex-node does not run volumes"}},
			false, true, "Failed Unsupported: bex-node does not run volumes"},
		{"unschedulable", &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}}},
			false, false, "Unschedulable: 0/1 nodes are available"},
	} {
		started, w := startOf(tc.pod)
		if started != tc.started || w.fatal != tc.fatal || w.why != tc.why {
			t.Errorf("%s: started %v, %+v; want %v, fatal %v, %q", tc.name, started, w, tc.started, tc.fatal, tc.why)
		}
	}
}

// TestCopySkipping: a log stream opened again gives only what came after
// what was copied, however the reads fall.
func TestCopySkipping(t *testing.T) {
	var out bytes.Buffer
	n := copySkipping(&out, iotest.OneByteReader(strings.NewReader("one\ntwo\n")), 0)
	n = copySkipping(&out, iotest.HalfReader(strings.NewReader("one\ntwo\nthree\n")), n)
	copySkipping(&out, strings.NewReader("one\ntwo\nthree\n"), n)
	if out.String() != "one\ntwo\nthree\n" {
		t.Errorf("copied %q, want each line once", out.String())
	}
	if n := copySkipping(io.Discard, strings.NewReader("abc"), 10); n != 3 {
		t.Errorf("a stream shorter than what was copied: read %d, want 3", n)
	}
}

// TestRunExit: the exit status is the terminated state's code, 128+N for a
// state with a signal only, and a memory kill says so.
func TestRunExit(t *testing.T) {
	r := &oneOff{}
	r.rel.Resources.Memory = "256Mi"
	for _, tc := range []struct {
		state      corev1.ContainerStateTerminated
		code       int
		reasonPart string
	}{
		{corev1.ContainerStateTerminated{ExitCode: 3}, 3, ""},
		{corev1.ContainerStateTerminated{Signal: 9}, 137, ""},
		{corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}, 137, "memory limit (256Mi)"},
	} {
		r.seen = &tc.state
		exit := r.exit()
		if exit.Code != tc.code || !strings.Contains(exit.Reason, tc.reasonPart) || (tc.reasonPart == "" && exit.Reason != "") {
			t.Errorf("%+v: exit %+v, want %d and %q", tc.state, exit, tc.code, tc.reasonPart)
		}
	}
}
