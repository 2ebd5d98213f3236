package secretfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// LoadOrCreate returns the secret kept in path, creating the file (mode
// 0600, never over an existing one) with a new random secret when it is
// missing; created says so. Its directory must exist. An empty file is an
// error that says to delete it.
func LoadOrCreate(path string) (secret string, created bool, err error) {
	data, err := os.ReadFile(path)
	if err == nil {
		if secret = strings.TrimSpace(string(data)); secret == "" {
			return "", false, fmt.Errorf("%s is empty: delete it to have a new secret made", path)
		}
		return secret, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("reading secret: %w", err)
	}
	secret = rand.Text()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("creating secret file: %w", err)
	}
	_, err = f.WriteString(secret + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return "", false, fmt.Errorf("writing secret file: %w", err)
	}
	return secret, true, nil
}
