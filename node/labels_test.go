package node_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"bex.co/bex/node"
)

func TestParseTaints(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []corev1.Taint
		wantErr string
	}{
		{in: "", want: nil},
		{in: "bex.co/dedicated=apps:NoSchedule,spare:PreferNoSchedule,gone=:NoExecute", want: []corev1.Taint{
			{Key: "bex.co/dedicated", Value: "apps", Effect: corev1.TaintEffectNoSchedule},
			{Key: "spare", Effect: corev1.TaintEffectPreferNoSchedule},
			{Key: "gone", Effect: corev1.TaintEffectNoExecute},
		}},
		{in: "a=b", wantErr: `taint "a=b": want KEY=VALUE:EFFECT or KEY:EFFECT`},
		{in: "a=b:NoSchedule:x", wantErr: "want KEY=VALUE:EFFECT"},
		{in: "a=b:Sometimes", wantErr: `effect "Sometimes" is not NoSchedule, PreferNoSchedule or NoExecute`},
		{in: "a b=c:NoSchedule", wantErr: `taint "a b=c:NoSchedule": key:`},
		{in: "a=b c:NoSchedule", wantErr: `taint "a=b c:NoSchedule": value:`},
	} {
		got, err := node.ParseTaints(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseTaints(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseTaints(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestValidateNodeLabels(t *testing.T) {
	for _, tc := range []struct {
		labels  map[string]string
		wantErr string
	}{
		{labels: nil},
		{labels: map[string]string{"bex.co/pool": "general", "node.kubernetes.io/instance-type": "local", "x.kubelet.kubernetes.io/y": "", corev1.LabelTopologyZone: "a"}},
		{labels: map[string]string{"node-role.kubernetes.io/worker": ""}, wantErr: "labels node-role.kubernetes.io/worker are in the kubernetes.io or k8s.io namespace"},
		{labels: map[string]string{"node-restriction.kubernetes.io/x": "", "example.k8s.io/y": ""}, wantErr: "labels example.k8s.io/y, node-restriction.kubernetes.io/x are"},
		{labels: map[string]string{"bex.co/pool": "a b"}, wantErr: `label bex.co/pool="a b"`},
		{labels: map[string]string{"-pool": "a"}, wantErr: `label "-pool"`},
	} {
		err := node.ValidateNodeLabels(tc.labels)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("ValidateNodeLabels(%v) = %v, want %q", tc.labels, err, tc.wantErr)
		}
	}
}
