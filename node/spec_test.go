package node

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestAdmitLifecycle: of the lifecycle hooks, bex-node runs a preStop
// sleep and refuses the rest, saying which.
func TestAdmitLifecycle(t *testing.T) {
	sleep := &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}
	exec := &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}
	sigquit := corev1.SIGQUIT
	for _, tc := range []struct {
		name      string
		lifecycle *corev1.Lifecycle
		refused   string // what the refusal says, empty when admitted
	}{
		{"none", nil, ""},
		{"preStop sleep", &corev1.Lifecycle{PreStop: sleep}, ""},
		{"preStop exec", &corev1.Lifecycle{PreStop: exec}, `a preStop hook of container "web" that is not sleep`},
		{"preStop httpGet", &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain"}}},
			`a preStop hook of container "web" that is not sleep`},
		{"postStart", &corev1.Lifecycle{PostStart: sleep, PreStop: sleep}, `a postStart hook in container "web"`},
		{"stop signal", &corev1.Lifecycle{StopSignal: &sigquit}, `a stop signal in container "web"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "app:1", Lifecycle: tc.lifecycle}}}}
			err := admit(pod)
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("admit: %v, want a refusal of %s", err, tc.refused)
			}
		})
	}
}
