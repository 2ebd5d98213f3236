package fleetstate

import (
	"strings"
	"testing"
)

func TestParseStatic(t *testing.T) {
	c, err := ParseStatic("local:cpu=4,memory=8Gi,pods=110,plans=starter+standard,version=v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pools[0]
	if c.Name != "local" || c.Region != "local" || !c.Healthy || c.Source != SourceStatic || p.Name != "default" ||
		p.Allocatable.CPU.String() != "4" || p.Allocatable.Memory.String() != "8Gi" || p.Allocatable.Pods != 110 ||
		strings.Join(c.Plans, ",") != "starter,standard" || c.ControlPlaneVersions[0] != "1.37.2" {
		t.Fatalf("parsed: %+v", c)
	}
	for spec, wantErr := range map[string]string{
		"local":                           "want NAME:",
		"Local:cpu=1,memory=1Gi,pods=1":   "static cluster name",
		"local:cpu=1,memory=1Gi":          "pods is required",
		"local:cpu=x,memory=1Gi,pods=1":   "cpu",
		"local:cpu=1,memory=1Gi,pods=1,z": "not key=value",
		"local:cpu=1,memory=1Gi,gpu=1":    "unknown key",
	} {
		if _, err := ParseStatic(spec); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: want error with %q, got %v", spec, wantErr, err)
		}
	}
}

func TestParseStaticStandby(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		standby bool
		wantErr string
	}{
		{spec: "local:cpu=4,memory=8Gi,pods=110", standby: false},
		{spec: "local:cpu=4,memory=8Gi,pods=110,standby", standby: true},
		{spec: "local:standby,cpu=4,memory=8Gi,pods=110", standby: true},
		{spec: "local:cpu=4,memory=8Gi,pods=110,standby=true", standby: true},
		{spec: "local:cpu=4,memory=8Gi,pods=110,standby=false", standby: false},
		{spec: "local:cpu=4,memory=8Gi,pods=110,standby=maybe", wantErr: "standby"},
		{spec: "local:cpu=4,memory=8Gi,pods=110,standby=", wantErr: "not key=value"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			c, err := ParseStatic(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error with %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Standby != tc.standby || !c.Healthy || len(c.Pools) != 1 || c.Pools[0].ReadyNodes != 1 {
				t.Fatalf("parsed: %+v, want standby=%t", c, tc.standby)
			}
		})
	}
}
