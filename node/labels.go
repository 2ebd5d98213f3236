package node

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// What a node agent may put on its own Node when it registers, checked as
// the kubelet checks its --node-labels and --register-with-taints
// (cmd/kubelet/app/options and k8s.io/kubelet/pkg/apis): labels in the
// kubernetes.io and k8s.io namespaces are refused unless the kubelet may
// set them on itself (NodeRestriction admission would refuse the Node
// otherwise), so node-role.kubernetes.io/* labels come from elsewhere
// (kubeadm's mark-control-plane phase, Cluster API's Machine label sync).

// selfLabels are the kubernetes.io labels a kubelet may set on its own Node.
var selfLabels = []string{
	corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
	corev1.LabelInstanceType, corev1.LabelInstanceTypeStable,
	corev1.LabelOSStable, corev1.LabelArchStable, corev1.LabelWindowsBuild,
	"beta.kubernetes.io/os", "beta.kubernetes.io/arch",
}

// ValidateNodeLabels says what is wrong with labels a node agent would
// register its Node with, all at once.
func ValidateNodeLabels(labels map[string]string) error {
	var errs, reserved []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		for _, e := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Sprintf("label %q: %s", k, e))
		}
		for _, e := range validation.IsValidLabelValue(labels[k]) {
			errs = append(errs, fmt.Sprintf("label %s=%q: %s", k, labels[k], e))
		}
		if isKubernetesLabel(k) && !isSelfLabel(k) {
			reserved = append(reserved, k)
		}
	}
	if len(reserved) > 0 {
		errs = append(errs, fmt.Sprintf("labels %s are in the kubernetes.io or k8s.io namespace, which a node may not set on itself "+
			"but for %s and the namespaces %s and %s (a node-role.kubernetes.io label comes from the Machine's labels, which Cluster API copies to the Node)",
			strings.Join(reserved, ", "), strings.Join(selfLabels, ", "), corev1.LabelNamespaceSuffixKubelet, corev1.LabelNamespaceSuffixNode))
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}

func labelNamespace(key string) string {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	return ns
}

func isKubernetesLabel(key string) bool {
	ns := labelNamespace(key)
	return ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
}

func isSelfLabel(key string) bool {
	if slices.Contains(selfLabels, key) {
		return true
	}
	ns := labelNamespace(key)
	for _, allowed := range []string{corev1.LabelNamespaceSuffixKubelet, corev1.LabelNamespaceSuffixNode} {
		if ns == allowed || strings.HasSuffix(ns, "."+allowed) {
			return true
		}
	}
	return false
}

// ParseTaints reads taints as the kubelet's --register-with-taints takes
// them: comma-separated KEY=VALUE:EFFECT or KEY:EFFECT, the effect one of
// NoSchedule, PreferNoSchedule and NoExecute. An empty string is none.
func ParseTaints(s string) ([]corev1.Taint, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []corev1.Taint
	for _, st := range strings.Split(s, ",") {
		t, err := parseTaint(st)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || strings.Contains(effect, ":") {
		return corev1.Taint{}, fmt.Errorf("taint %q: want KEY=VALUE:EFFECT or KEY:EFFECT", s)
	}
	t := corev1.Taint{Effect: corev1.TaintEffect(effect)}
	t.Key, t.Value, _ = strings.Cut(kv, "=")
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", s, effect)
	}
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("taint %q: key: %s", s, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("taint %q: value: %s", s, strings.Join(errs, "; "))
	}
	return t, nil
}
