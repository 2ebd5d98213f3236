package app

import (
	"context"
	"flag"
	"io"

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"bex.co/bex/apiserver"
	"bex.co/bex/cmd/internal/command"
)

// Main is bex-apiserver's command line: it parses args (without the program
// name), then completes, validates and runs the options until ctx ends.
// Help goes to out; logs go through klog (its flags are the command's). A
// refused command line is a command.UsageError.
func Main(ctx context.Context, args []string, out io.Writer) error {
	// The fleet's informer cache is controller-runtime's; its logs go to klog.
	ctrllog.SetLogger(klog.NewKlogr())
	o := apiserver.NewOptions()
	fs := command.NewFlagSet("bex-apiserver", out)
	o.AddFlags(fs)
	logFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logFlags)
	fs.AddGoFlagSet(logFlags)
	if done, err := command.Parse(fs, args, o.Complete, o.Validate); done {
		return err
	}
	return o.Run(ctx)
}
