package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckToolsOutsideUsersPath: Debian puts nft and runc in /usr/sbin
// and /sbin, on root's PATH only. A user other than root is told that
// sandboxes need root, not to install tools that are installed; root,
// which runs them by name, is told that they are missing from its PATH.
func TestCheckToolsOutsideUsersPath(t *testing.T) {
	sbin := t.TempDir()
	for _, name := range []string{"runc", "ip", "nft"} {
		if err := os.WriteFile(filepath.Join(sbin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", t.TempDir())

	err := check("", 1000, []string{sbin})
	if err == nil || !strings.Contains(err.Error(), "runs as root") {
		t.Fatalf("as uid 1000: %v, want root asked for", err)
	}
	if strings.Contains(err.Error(), "apt-get install") {
		t.Errorf("as uid 1000, with runc, ip and nft in %s: %v, want no install asked for", sbin, err)
	}

	err = check("", 0, []string{sbin})
	if err == nil {
		t.Fatal("as root with runc, ip and nft off its PATH: no error")
	}
	for _, want := range []string{"apt-get install runc", "apt-get install iproute2", "apt-get install nftables"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("as root with runc, ip and nft off its PATH: %v, want %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "runs as root") {
		t.Errorf("as root: %v, asks for root", err)
	}
}
