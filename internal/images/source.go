package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Module is the module whose commands become the images.
const Module = "bex.co/bex"

// ChartDir is the chart, relative to the module root.
const ChartDir = "deploy/chart/bex"

// ModuleRoot returns the root of the bex.co/bex module at dir or above it.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && modulePath(data) == Module {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of module %s at %s or above it: run from a checkout of bex", Module, dir)
		}
	}
}

// CheckModuleRoot returns an error unless dir is the root of bex.co/bex.
func CheckModuleRoot(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return fmt.Errorf("reading the module's go.mod: %w", err)
	}
	if p := modulePath(data); p != Module {
		return fmt.Errorf("%s is the root of module %q, not of %s", dir, p, Module)
	}
	return nil
}

// Chart is what the chart's Chart.yaml says about the images.
type Chart struct {
	// AppVersion is the tag every component's image has unless the values
	// name another.
	AppVersion string `json:"appVersion"`
	// Sources are the project's source URLs; the first becomes the label
	// org.opencontainers.image.source.
	Sources []string `json:"sources"`
}

// ReadChart reads Chart.yaml of the chart under the module root.
func ReadChart(root string) (Chart, error) {
	var c Chart
	p := filepath.Join(root, ChartDir, "Chart.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		return c, fmt.Errorf("reading the chart: %w", err)
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("parsing %s: %w", p, err)
	}
	if c.AppVersion == "" {
		return c, fmt.Errorf("%s has no appVersion", p)
	}
	return c, nil
}

// Revision returns the commit checked out at root and its commit time. An
// error says there is none (no git, or not a git checkout).
func Revision(ctx context.Context, root string) (string, time.Time, error) {
	cmd := exec.CommandContext(ctx, "git", "-C", root, "log", "-1", "--format=%H %ct")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("reading the commit of %s: %w: %s", root, err, strings.TrimSpace(stderr.String()))
	}
	commit, secs, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	n, err := strconv.ParseInt(secs, 10, 64)
	if !ok || err != nil {
		return "", time.Time{}, errors.New("reading the commit: unexpected git log output")
	}
	return commit, time.Unix(n, 0).UTC(), nil
}

// modulePath is the path the module line of go.mod data declares.
func modulePath(data []byte) string {
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}
