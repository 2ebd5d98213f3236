package scheduler

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
)

// figures renders a Capacity exactly: CPU in millicores, memory in bytes.
func figures(c schedulingv1alpha1.Capacity) string {
	cpu, mem := c.CPU, c.Memory
	return fmt.Sprintf("cpu=%dm mem=%d pods=%d", cpu.MilliValue(), mem.Value(), c.Pods)
}

// want renders expected figures the way figures does.
func want(cpu, mem string, pods int64) string {
	c, m := resource.MustParse(cpu), resource.MustParse(mem)
	return fmt.Sprintf("cpu=%dm mem=%d pods=%d", c.MilliValue(), m.Value(), pods)
}

// summary renders a ClusterCapacity's status in one comparable string.
func summary(c *schedulingv1alpha1.ClusterCapacity) string {
	s := &c.Status
	var b strings.Builder
	fmt.Fprintf(&b, "%s source=%s region=%s plans=%v versions=%v mid=%t healthy=%t accepts=%t reason=%s alloc=[%s] req=[%s]",
		c.Name, s.Source, s.Region, s.Plans, s.ControlPlaneVersions, s.MidUpgrade, s.Healthy, s.AcceptsPlacements, s.Reason,
		figures(s.Allocatable), figures(s.Requested))
	for _, p := range s.Pools {
		fmt.Fprintf(&b, " | %s nodes=%d ready=%d alloc=[%s] req=[%s]", p.Name, p.Nodes, p.ReadyNodes, figures(p.Allocatable), figures(p.Requested))
	}
	return b.String()
}

// verdicts renders a review's candidates as "cluster/pool=Reason".
func verdicts(st *schedulingv1alpha1.PlacementReviewStatus) []string {
	var out []string
	for _, c := range st.Candidates {
		where := c.Cluster
		if c.Pool != "" {
			where += "/" + c.Pool
		}
		out = append(out, where+"="+c.Reason)
	}
	return out
}
