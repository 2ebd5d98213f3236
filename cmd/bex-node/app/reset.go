package app

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/pflag"

	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/node"
)

// ResetOptions are the flags of "bex-node reset", which removes what the
// agents of a state directory left on the machine: the containers that
// outlive an agent's stop, their volumes, logs and images, and the
// sandbox slot. The agent must not run.
type ResetOptions struct {
	StateDir      string
	SandboxSubnet string
}

// AddFlags binds the options to fs.
func (o *ResetOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.StateDir, "state-dir", o.StateDir, "The agent's --state-dir")
	fs.StringVar(&o.SandboxSubnet, "sandbox-subnet", o.SandboxSubnet, "The agent's --sandbox-subnet")
}

// Validate says what is wrong with the flags.
func (o *ResetOptions) Validate() error {
	if o.StateDir == "" {
		return errors.New("--state-dir is required")
	}
	return nil
}

// Run removes the containers and files of the agents of StateDir.
func (o *ResetOptions) Run() error {
	stateDir, err := filepath.Abs(o.StateDir)
	if err != nil {
		return err
	}
	sb, err := sandbox.New(sandbox.Options{Subnet: o.SandboxSubnet, StateDir: stateDir, Owner: stateDir})
	if err != nil {
		return fmt.Errorf("claiming the node's sandbox slot: %w", err)
	}
	err = node.Reset(sb, stateDir)
	return errors.Join(err, sb.Close())
}

func mainReset(args []string, out io.Writer) error {
	o := &ResetOptions{StateDir: NewOptions().StateDir}
	fs := command.NewFlagSet("bex-node reset", out)
	o.AddFlags(fs)
	if done, err := command.Parse(fs, args, o.Validate); done {
		return err
	}
	return o.Run()
}
