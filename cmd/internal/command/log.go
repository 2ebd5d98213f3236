package command

import (
	"io"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2/textlogger"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// NewLogger returns the text logger a command writes to out, and makes it
// controller-runtime's.
func NewLogger(out io.Writer) logr.Logger {
	log := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(out)))
	ctrllog.SetLogger(log)
	return log
}
