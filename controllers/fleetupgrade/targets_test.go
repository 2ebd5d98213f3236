package fleetupgrade

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func machine(name string, deleting bool, addrs ...clusterv1.MachineAddress) clusterv1.Machine {
	m := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name}}
	m.Status.Addresses = addrs
	if deleting {
		now := metav1.Now()
		m.DeletionTimestamp = &now
	}
	return m
}

// joined is a machine with a Node and no address.
func joined(name, node string) clusterv1.Machine {
	m := machine(name, false)
	m.Status.NodeRef.Name = node
	return m
}

func deleting(m clusterv1.Machine) clusterv1.Machine {
	now := metav1.Now()
	m.DeletionTimestamp = &now
	return m
}

func addr(t clusterv1.MachineAddressType, a string) clusterv1.MachineAddress {
	return clusterv1.MachineAddress{Type: t, Address: a}
}

func TestTargets(t *testing.T) {
	base := &rest.Config{Host: "https://lb.example:443", BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}
	withNode := machine("m-3", false, addr(clusterv1.MachineExternalIP, "203.0.113.3"))
	withNode.Status.NodeRef.Name = "node-3"
	held := machine("held", true, addr(clusterv1.MachineInternalIP, "10.0.0.8"))
	held.Annotations = map[string]string{GateHook: "up"}
	for _, tc := range []struct {
		name     string
		base     *rest.Config
		port     int32
		machines []clusterv1.Machine
		want     []string // name=host
		skipped  []string
		wantErr  bool
	}{
		{name: "internal IP first, port from the endpoint, names by hostname", base: base, port: 6443, machines: []clusterv1.Machine{
			machine("m-2", false, addr(clusterv1.MachineExternalIP, "203.0.113.2"), addr(clusterv1.MachineInternalIP, "10.0.0.2"), addr(clusterv1.MachineHostName, "cp-2")),
			machine("m-1", false, addr(clusterv1.MachineInternalIP, "10.0.0.1")),
			withNode,
		}, want: []string{"cp-2=https://10.0.0.2:6443", "m-1=https://10.0.0.1:6443", "node-3=https://203.0.113.3:6443"}},
		{name: "deleting machines are not targets unless the gate holds them, machines without an IP are skipped", base: base, machines: []clusterv1.Machine{
			machine("gone", true, addr(clusterv1.MachineInternalIP, "10.0.0.9")),
			held,
			machine("new", false, addr(clusterv1.MachineHostName, "new")),
			machine("m-1", false, addr(clusterv1.MachineInternalIP, "fd00::1")),
		}, want: []string{"held=https://10.0.0.8:6443", "m-1=https://[fd00::1]:6443"}, skipped: []string{"new"}},
		{name: "no machine with an address", base: base, machines: []clusterv1.Machine{machine("new", false)}, skipped: []string{"new"}, wantErr: true},
		{name: "a joined machine without an address cannot be probed", base: base, machines: []clusterv1.Machine{
			machine("m-1", false, addr(clusterv1.MachineInternalIP, "10.0.0.1")),
			joined("m-2", "node-2"),
		}, wantErr: true},
		{name: "a joined machine without an address that is deleting is no target", base: base, machines: []clusterv1.Machine{
			machine("m-1", false, addr(clusterv1.MachineInternalIP, "10.0.0.1")),
			deleting(joined("m-2", "node-2")),
		}, want: []string{"m-1=https://10.0.0.1:6443"}},
		{name: "no config", machines: []clusterv1.Machine{machine("m-1", false, addr(clusterv1.MachineInternalIP, "10.0.0.1"))}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			targets, skipped, err := Targets(tc.base, tc.port, tc.machines)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			var got []string
			for _, tg := range targets {
				got = append(got, tg.Name+"="+tg.Config.Host)
				if tg.Config.BearerToken != "tok" || string(tg.Config.CAData) != "ca" || tg.Config.ServerName != "kubernetes.default.svc" {
					t.Errorf("%s: credentials or server name not carried over: %+v", tg.Name, tg.Config)
				}
			}
			if !slices.Equal(got, tc.want) || !slices.Equal(skipped, tc.skipped) {
				t.Errorf("targets %v skipped %v, want %v and %v", got, skipped, tc.want, tc.skipped)
			}
		})
	}
	if base.Host != "https://lb.example:443" || base.ServerName != "" {
		t.Errorf("base config changed: %+v", base)
	}
}
