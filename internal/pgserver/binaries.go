package pgserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// debianRoot is where Debian and Ubuntu install the server binaries, one
// directory per major version: /usr/lib/postgresql/15/bin.
const debianRoot = "/usr/lib/postgresql"

// installHint tells a person how to get the server binaries.
const installHint = "install them with `apt-get install postgresql`"

// findBinDir returns the directory that holds initdb and postgres: under root
// (debianRoot outside tests) the one for major version want when want is set
// (the version of an existing cluster), else the highest; then the directory
// of postgres on $PATH.
func findBinDir(ctx context.Context, root, want string) (string, error) {
	type candidate struct {
		dir     string
		version string
		key     []int
	}
	var cands []candidate
	dirs, _ := filepath.Glob(filepath.Join(root, "*", "bin"))
	for _, dir := range dirs {
		if !hasServerBinaries(dir) {
			continue
		}
		v := filepath.Base(filepath.Dir(dir))
		key, ok := parseVersion(v)
		if !ok {
			continue
		}
		cands = append(cands, candidate{dir: dir, version: v, key: key})
	}
	slices.SortFunc(cands, func(a, b candidate) int { return slices.Compare(b.key, a.key) })
	for _, c := range cands {
		if want == "" || c.version == want {
			return c.dir, nil
		}
	}

	if postgres, err := exec.LookPath("postgres"); err == nil {
		dir := filepath.Dir(postgres)
		if hasServerBinaries(dir) {
			if want == "" {
				return dir, nil
			}
			v, err := serverVersion(ctx, postgres)
			if err != nil {
				return "", err
			}
			if majorOf(v) == want {
				return dir, nil
			}
		}
	}

	if want != "" {
		return "", fmt.Errorf("the data directory holds a PostgreSQL %s cluster, but no PostgreSQL %s server binaries are installed in %s/%s/bin or on $PATH: install them with `apt-get install postgresql-%s`",
			want, want, root, want, want)
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, postgres) in %s/*/bin or on $PATH: %s", root, installHint)
}

// hasServerBinaries reports whether dir holds both initdb and postgres.
func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// serverVersion runs `postgres --version` and returns the version number,
// for example "15.20".
func serverVersion(ctx context.Context, postgres string) (string, error) {
	out, err := exec.CommandContext(ctx, postgres, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("running %s --version: %w", postgres, err)
	}
	fields := strings.Fields(string(out)) // postgres (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)
	if len(fields) < 3 {
		return "", fmt.Errorf("unexpected output of %s --version: %q", postgres, out)
	}
	return fields[2], nil
}

// majorOf returns the major version as PG_VERSION spells it: "15" for 15.20,
// "9.6" for 9.6.24.
func majorOf(version string) string {
	parts := strings.Split(version, ".")
	if n, err := strconv.Atoi(parts[0]); err == nil && n < 10 && len(parts) > 1 {
		return parts[0] + "." + parts[1]
	}
	return parts[0]
}

// parseVersion turns "15" or "9.6" into comparable numbers.
func parseVersion(v string) ([]int, bool) {
	var key []int
	for _, p := range strings.Split(v, ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, false
		}
		key = append(key, n)
	}
	return key, true
}
