package build

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
)

// processNamePattern is the grammar of process types: DNS labels of at most
// 22 characters, as App.spec.processes requires.
var processNamePattern = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,20}[a-z0-9])?$`)

// parseProcfile reads a Procfile: "type: command" lines, blank lines and
// "#" comments.
func parseProcfile(data string) (map[string]string, error) {
	procs := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(data))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, cmd, ok := strings.Cut(line, ":")
		name, cmd = strings.TrimSpace(name), strings.TrimSpace(cmd)
		if !ok || cmd == "" {
			return nil, fmt.Errorf("Procfile line %d: want \"type: command\", got %q", n, line)
		}
		if !processNamePattern.MatchString(name) {
			return nil, fmt.Errorf("Procfile line %d: process type %q must be lowercase letters, digits and '-', start with a letter, at most 22 characters", n, name)
		}
		if i := strings.IndexFunc(cmd, isControl); i >= 0 {
			return nil, fmt.Errorf("Procfile line %d: the command of %q holds the control character %q; a command is one line of text", n, name, cmd[i])
		}
		if _, dup := procs[name]; dup {
			return nil, fmt.Errorf("Procfile line %d: process type %q is declared twice", n, name)
		}
		procs[name] = cmd
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading Procfile: %w", err)
	}
	return procs, nil
}

// isControl reports whether r is a control character other than a tab: a
// carriage return inside a line, a NUL no process's arguments can carry.
func isControl(r rune) bool {
	return (r < 0x20 && r != '\t') || r == 0x7f
}

// processes merges the Procfile of the checkout in fsys (its os.Root's FS)
// over the stack's defaults.
func processes(fsys fs.FS, defaults map[string]string) (map[string]string, error) {
	procs := map[string]string{}
	for k, v := range defaults {
		procs[k] = v
	}
	b, err := readFile(fsys, "Procfile")
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		declared, err := parseProcfile(string(b))
		if err != nil {
			return nil, err
		}
		for k, v := range declared {
			procs[k] = v
		}
	}
	if len(procs) == 0 {
		return nil, errors.New("no process to run: add a Procfile with a line such as \"web: <command that listens on $PORT>\"")
	}
	return procs, nil
}

func describeProcesses(procs map[string]string) string {
	names := make([]string, 0, len(procs))
	for k := range procs {
		names = append(names, k)
	}
	sort.Strings(names)
	return "Process types -> " + strings.Join(names, ", ")
}
