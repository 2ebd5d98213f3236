package procstat_test

import (
	"os"
	"os/exec"
	"testing"

	"bex.co/bex/internal/procstat"
)

// TestFields reads a process whose command name holds a space and a
// parenthesis: its parent, state and start time come from the fields
// after the name's last parenthesis.
func TestFields(t *testing.T) {
	dir := t.TempDir()
	bin := dir + "/a b) c"
	if err := os.Symlink("/bin/sleep", bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	f, err := procstat.Fields(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if ppid, err := procstat.Int(f, procstat.PPID); err != nil || ppid != int64(os.Getpid()) {
		t.Errorf("ppid %d %v, want %d", ppid, err, os.Getpid())
	}
	if f[procstat.State] != "S" && f[procstat.State] != "R" {
		t.Errorf("state %q, want S or R", f[procstat.State])
	}
	if start, err := procstat.Int(f, procstat.StartTime); err != nil || start <= 0 {
		t.Errorf("start time %d %v", start, err)
	}
	if _, err := procstat.Fields(1 << 30); err == nil {
		t.Error("Fields of no process: no error")
	}
}
