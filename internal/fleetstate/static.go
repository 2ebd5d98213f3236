package fleetstate

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ParseStatic parses a static cluster from its flag form
//
//	NAME:cpu=4,memory=8Gi,pods=110[,pool=default][,region=local][,plans=starter+standard][,version=1.37.2][,standby]
//
// into a healthy cluster with one pool of one ready node. cpu, memory and
// pods are required; the pool defaults to "default", the region to NAME.
// standby (or standby=true) marks the cluster Standby: it takes new
// placements only while no Cluster API cluster of the fleet can run apps.
func ParseStatic(spec string) (Cluster, error) {
	name, rest, ok := strings.Cut(spec, ":")
	if !ok {
		return Cluster{}, fmt.Errorf("static cluster %q: want NAME:cpu=…,memory=…,pods=…", spec)
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return Cluster{}, fmt.Errorf("static cluster name %q: %s", name, strings.Join(errs, "; "))
	}
	c := Cluster{Name: name, Source: SourceStatic, Region: name, Healthy: true}
	pool := Pool{Name: "default", Nodes: 1, ReadyNodes: 1}
	have := map[string]bool{}
	for _, kv := range strings.Split(rest, ",") {
		if kv == "standby" {
			kv = "standby=true"
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			return Cluster{}, fmt.Errorf("static cluster %s: %q is not key=value", name, kv)
		}
		have[k] = true
		var err error
		switch k {
		case "cpu":
			pool.Allocatable.CPU, err = resource.ParseQuantity(v)
		case "memory":
			pool.Allocatable.Memory, err = resource.ParseQuantity(v)
		case "pods":
			pool.Allocatable.Pods, err = strconv.ParseInt(v, 10, 64)
		case "pool":
			pool.Name = v
		case "region":
			c.Region = v
		case "plans":
			c.Plans = strings.Split(v, "+")
		case "version":
			c.ControlPlaneVersions = []string{strings.TrimPrefix(v, "v")}
		case "standby":
			c.Standby, err = strconv.ParseBool(v)
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return Cluster{}, fmt.Errorf("static cluster %s: %s: %w", name, k, err)
		}
	}
	for _, k := range []string{"cpu", "memory", "pods"} {
		if !have[k] {
			return Cluster{}, fmt.Errorf("static cluster %s: %s is required", name, k)
		}
	}
	c.Pools = []Pool{pool}
	return c, nil
}
