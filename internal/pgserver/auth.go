package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// hbaConf is the pg_hba.conf of every cluster Start runs: each connection,
// over TCP or the Unix socket, presents the superuser's password.
const hbaConf = `# Written by bex (internal/pgserver) when the server starts: every
# connection, over TCP or the Unix socket, presents a password (SCRAM-SHA-256).
local   all   all                  scram-sha-256
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
`

// secure makes the stopped cluster in dataDir ask every connection for
// password: unless its pg_hba.conf is already hbaConf and the password is
// not new, it sets the superuser's password in single-user mode (which
// listens on no socket) and then writes hbaConf. A cluster initialised with
// trust (by an earlier version) is thus upgraded before it listens; one
// stopped between the two steps is upgraded again.
func secure(ctx context.Context, binDir, dataDir, password string, created bool, cred *syscall.Credential, out *tail) error {
	hbaPath := filepath.Join(dataDir, "pg_hba.conf")
	current, err := os.ReadFile(hbaPath)
	if err != nil {
		return fmt.Errorf("reading pg_hba.conf: %w", err)
	}
	if string(current) == hbaConf && !created {
		return nil
	}
	// The password is random base32 text: nothing in it needs quoting.
	stmt := "ALTER ROLE " + superuser + " WITH PASSWORD '" + password + "'\n"
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "postgres"), "--single", "-D", dataDir,
		"-c", "password_encryption=scram-sha-256", "-c", "log_statement=none", "postgres")
	cmd.Dir = dataDir
	cmd.Env = childEnv()
	cmd.Stdin = strings.NewReader(stmt)
	var result bytes.Buffer
	cmd.Stdout, cmd.Stderr = &result, &result
	cmd.SysProcAttr = sysProcAttr(cred, 0)
	err = cmd.Run()
	_, _ = out.Write(bytes.ReplaceAll(result.Bytes(), []byte(password), []byte("***")))
	if err == nil && bytes.Contains(result.Bytes(), []byte("ERROR:")) {
		err = errors.New("the statement failed")
	}
	if err != nil {
		return fmt.Errorf("setting the password of role %s in %s: %w%s", superuser, dataDir, err, out.quote())
	}
	// Writing over the existing file keeps its owner and mode.
	if err := os.WriteFile(hbaPath, []byte(hbaConf), 0o600); err != nil {
		return fmt.Errorf("writing pg_hba.conf: %w", err)
	}
	return nil
}
