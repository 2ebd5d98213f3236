package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The plane's first kube-apiserver starts no older than the newest version
// the machines that took the plane over ran, whatever --kube-version says:
// a kube-apiserver must not serve what a newer one wrote.
func TestPlaneVersion(t *testing.T) {
	o := NewOptions()
	o.StateDir = t.TempDir()
	o.KubeVersion = "1.36.3"
	if v, err := o.planeVersion(); err != nil || v != "1.36.3" {
		t.Fatalf("with no machine: %q, %v; want --kube-version's 1.36.3", v, err)
	}
	writePlaneMachines(t, o.StateDir, map[string]string{"management-control-plane-a": "1.37.2", "management-control-plane-b": "1.36.3"})
	if v, err := o.planeVersion(); err != nil || v != "1.37.2" {
		t.Errorf("machines of 1.37.2 and 1.36.3: %q, %v; want 1.37.2", v, err)
	}
	o.KubeVersion = "1.38.0"
	if v, err := o.planeVersion(); err != nil || v != "1.38.0" {
		t.Errorf("--kube-version newer than the machines: %q, %v; want 1.38.0", v, err)
	}
}

// writePlaneMachines writes the files the plane's machines leave in state.
func writePlaneMachines(t *testing.T, state string, versions map[string]string) {
	t.Helper()
	for name, version := range versions {
		dir := filepath.Join(state, "fleet", "default", "management", "machines", name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "machine.json"), []byte(`{"version": "`+version+`"}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A plane Cluster API's machines served does not start without
// --managed-control-plane: nothing would start its machines, and its own
// kube-apiserver could be older than what they wrote.
func TestUnmanagedPlaneRefused(t *testing.T) {
	o := NewOptions()
	o.StateDir = t.TempDir()
	if err := o.checkPlaneUnmanaged(); err != nil {
		t.Fatalf("a new state: %v", err)
	}
	writePlaneMachines(t, o.StateDir, map[string]string{"management-control-plane-a": "1.37.2"})
	err := o.checkPlaneUnmanaged()
	if err == nil || !strings.Contains(err.Error(), "start with --managed-control-plane") || !strings.Contains(err.Error(), "1.37.2") {
		t.Fatalf("a plane Cluster API's machines served: %v; want a refusal that says --managed-control-plane and the machines' version", err)
	}
	o.ManagedPlane = true
	if err := o.checkPlaneUnmanaged(); err != nil {
		t.Errorf("with --managed-control-plane: %v", err)
	}
}
