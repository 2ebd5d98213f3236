package main

import (
	"errors"
	"strings"
	"testing"
)

// TestFleetNeedsSandboxes: --fleet is refused before anything starts on a
// machine that cannot run runc sandboxes, --unsafe-no-sandbox or not: the
// cluster's worker is bex-node, which runs every container in one.
func TestFleetNeedsSandboxes(t *testing.T) {
	noRoot := func(string) error { return errors.New("tenant sandboxes need that it runs as root") }
	for _, noSandbox := range []bool{false, true} {
		o := &options{pushes: 6, stack: "go", fleet: true, noSandbox: noSandbox, sandboxCheck: noRoot}
		err := o.validate()
		if err == nil || !strings.Contains(err.Error(), "--fleet") || !strings.Contains(err.Error(), "runs as root") {
			t.Errorf("--fleet, --unsafe-no-sandbox %v, no sandboxes: %v, want --fleet refused with the reason", noSandbox, err)
		}
	}
	o := &options{pushes: 6, stack: "go", noSandbox: true, sandboxCheck: noRoot}
	if err := o.validate(); err != nil {
		t.Errorf("--unsafe-no-sandbox without --fleet, no sandboxes: %v, want it run", err)
	}
}

// TestLocalFleetOnlyWithFleet: the platform runs its local fleet only for
// --fleet; without it the fleet would build Cluster API's managers in the
// background of the timed pushes on a machine that lacks them.
func TestLocalFleetOnlyWithFleet(t *testing.T) {
	for _, fleet := range []bool{false, true} {
		o := &options{pushes: 6, stack: "go", fleet: fleet, stateDir: t.TempDir()}
		if got := o.platformOptions().NoLocalFleet; got != !fleet {
			t.Errorf("--fleet %v: NoLocalFleet %v, want %v", fleet, got, !fleet)
		}
	}
}
