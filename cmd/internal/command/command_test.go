package command_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"bex.co/bex/cmd/internal/command"
)

// run is the Main of a small command: --name is required, and its run
// fails.
func run(args []string, out *bytes.Buffer) error {
	fs := command.NewFlagSet("tool", out)
	name := fs.String("name", "", "Name of the thing (required)")
	fs.Int("count", 0, "How many")
	validate := func() error {
		if *name == "" {
			return errors.New("--name is required")
		}
		return nil
	}
	if done, err := command.Parse(fs, args, validate); done {
		return err
	}
	return errors.New("failed")
}

// TestExitCodes: a flag the command does not know, a value it cannot
// parse, an argument left over and a failed Validate exit 2 with the
// message; help exits 0 and prints the flags; an error of the run exits 1.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
		out  string
	}{
		{args: []string{"--nme", "x"}, want: 2, out: "tool: unknown flag: --nme\n"},
		{args: []string{"--count", "many", "--name", "x"}, want: 2, out: `invalid argument "many" for "--count" flag`},
		{args: []string{"--name", "x", "extra"}, want: 2, out: `tool: unexpected arguments ["extra"]: every setting is a flag`},
		{args: nil, want: 2, out: "tool: --name is required\n"},
		{args: []string{"--help"}, want: 0, out: "--count int"},
		{args: []string{"--name", "x"}, want: 1, out: "tool: failed\n"},
	} {
		var out bytes.Buffer
		err := run(tc.args, &out)
		if got := command.Exit(&out, "tool", err); got != tc.want || !strings.Contains(out.String(), tc.out) {
			t.Errorf("%q: exit %d, want %d; output:\n%s\nwant it to contain %q", tc.args, got, tc.want, out.String(), tc.out)
		}
	}
}

// TestCobraUsage: a cobra command's unknown flag, on the root or on a
// subcommand, exits 2; its run's error exits 1.
func TestCobraUsage(t *testing.T) {
	newRoot := func() *cobra.Command {
		root := &cobra.Command{Use: "tool", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(&cobra.Command{Use: "sub", RunE: func(*cobra.Command, []string) error { return errors.New("failed") }})
		command.CobraUsage(root)
		return root
	}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{args: []string{"--nope"}, want: 2},
		{args: []string{"sub", "--nope"}, want: 2},
		{args: []string{"sub"}, want: 1},
	} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(tc.args)
		if got := command.Exit(&out, "tool", root.Execute()); got != tc.want {
			t.Errorf("%q: exit %d, want %d; output:\n%s", tc.args, got, tc.want, out.String())
		}
	}
}

// TestExitStatus: a command that ran another exits with the other's
// status, and prints nothing of its own.
func TestExitStatus(t *testing.T) {
	var out bytes.Buffer
	err := fmt.Errorf("running: %w", &command.ExitStatus{Code: 7})
	if got := command.Exit(&out, "bex", err); got != 7 || out.Len() != 0 {
		t.Errorf("exit %d, output %q; want 7 and nothing", got, out.String())
	}
}
