package wheeltest

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Wheel is a pure-Python distribution of one module.
type Wheel struct {
	// Project is the distribution's name, as a requirement names it
	// ("bexbench-greeting").
	Project string
	// Module is the importable module ("bexbench_greeting").
	Module string
	// Version is the distribution's version ("1.0").
	Version string
	// Source is the module's __init__.py.
	Source string
}

// Write writes w as a wheel into dir and returns its path.
func (w Wheel) Write(dir string) (string, error) {
	dist := w.Module + "-" + w.Version
	files := []struct{ name, body string }{
		{w.Module + "/__init__.py", w.Source},
		{dist + ".dist-info/METADATA", "Metadata-Version: 2.1\nName: " + w.Project + "\nVersion: " + w.Version + "\n"},
		{dist + ".dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: bex-wheeltest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{dist + ".dist-info/top_level.txt", w.Module + "\n"},
	}
	path := filepath.Join(dir, dist+"-py3-none-any.whl")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	// RECORD lists every file with its digest, and itself without one.
	var record strings.Builder
	for _, file := range files {
		if err := add(zw, file.name, file.body); err != nil {
			return "", err
		}
		sum := sha256.Sum256([]byte(file.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", file.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(file.body))
	}
	recordName := dist + ".dist-info/RECORD"
	fmt.Fprintf(&record, "%s,,\n", recordName)
	if err := add(zw, recordName, record.String()); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return path, f.Close()
}

func add(zw *zip.Writer, name, body string) error {
	w, err := zw.Create(name)
	if err != nil {
		return err
	}
	_, err = w.Write([]byte(body))
	return err
}
