package app

import (
	"context"
	"io"

	"bex.co/bex/cmd/internal/command"
)

// Main parses args and runs the platform until ctx ends. The platform's
// progress and summary go to stdout; a refused command line's help goes to
// stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := NewOptions()
	fs := command.NewFlagSet("bex-embedded", stderr)
	o.AddFlags(fs)
	if done, err := command.Parse(fs, args, o.Complete, o.Validate); done {
		return err
	}
	return o.Run(ctx, stdout)
}
