package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Config is what bex login saves: where the API is and the token to call
// it with.
type Config struct {
	API   string `json:"api"`
	Token string `json:"token"`
}

// configFile returns the path of the configuration file under dir (the
// user's configuration directory when empty).
func configFile(dir string) (string, error) {
	if dir == "" {
		d, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("finding the configuration directory: %w", err)
		}
		dir = d
	}
	return filepath.Join(dir, "bex", "config.json"), nil
}

// loadConfig reads the configuration file; a missing file is an empty
// configuration.
func loadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("reading configuration: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("reading configuration %s: %w (fix or remove the file, then run bex login)", path, err)
	}
	return c, nil
}

// saveConfig writes c to path, readable by the user only, replacing the
// file atomically.
func saveConfig(path string, c Config) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating configuration directory: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.json")
	if err != nil {
		return fmt.Errorf("saving configuration: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("saving configuration: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("saving configuration: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving configuration: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("saving configuration: %w", err)
	}
	return nil
}
