package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnPathSbin: nginx and HAProxy are found where Debian installs them,
// in /usr/sbin, for a user whose PATH lacks it; a command in none of the
// places is refused saying what to install.
func TestOnPathSbin(t *testing.T) {
	sbin := t.TempDir()
	nginx := filepath.Join(sbin, "nginx")
	if err := os.WriteFile(nginx, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())

	bin, err := onPath("nginx", "nginx", sbin)(t.Context(), nil, nil)
	if err != nil || bin != nginx {
		t.Errorf("nginx in %s, off PATH: %q, %v; want %s", sbin, bin, err, nginx)
	}
	_, err = onPath("haproxy", "haproxy", sbin)(t.Context(), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "apt-get install haproxy") {
		t.Errorf("haproxy nowhere: %v, want what to install", err)
	}
}
