package app

import (
	"net"
	"testing"
)

// TestListenStable: the ports the platform remembers for its next start
// lie below the kernel's ephemeral range, which outgoing connections and
// ":0" listeners take ports from while the platform is stopped.
func TestListenStable(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		l, err := listenStable("127.0.0.1", low)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		if port < stablePortsFrom || port >= low {
			t.Errorf("port %d, want one from %d to %d (below the ephemeral range)", port, stablePortsFrom, low-1)
		}
	}
	// No room below the ephemeral range: any free port.
	l, err := listenStable("127.0.0.1", stablePortsFrom+10)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}
