package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"

	"bex.co/bex/internal/runtime"
)

// interactive reports whether cmd's Pod takes input or has a terminal: its
// container is made with stdin, stdinOnce and tty, and Run attaches to it
// (pods/attach) rather than following its log.
func interactive(cmd runtime.Command) bool { return cmd.Stdin || cmd.Terminal }

// attach connects s to the run's container through the apiserver's
// pods/attach until the container's process ends or ctx ends: s.Stdin to
// its stdin (an empty one when the command has input but s has none),
// its stdout and stderr to s's (on a terminal, one stream to s.Stdout),
// cmd.Size and then s.Resize's sizes to its terminal. The node holds the
// process of a stdinOnce container until the attach, so that none of its
// output is lost. How the process ended is the container's terminated
// state's, not the stream's: an exit status on the stream is no error; an
// attach that fails is said on s.Stdout, and the run goes on without
// its streams.
func (r *oneOff) attach(ctx context.Context, cmd runtime.Command, s runtime.Streams) {
	stdout, stderr := s.Stdout, s.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	opts := remotecommand.StreamOptions{Stdout: stdout, Tty: cmd.Terminal}
	switch {
	case cmd.Terminal:
		opts.Stdin = s.Stdin
		done := make(chan struct{})
		defer close(done)
		opts.TerminalSizeQueue = &sizeQueue{first: cmd.Size, sizes: s.Resize, done: done}
	default:
		opts.Stdin, opts.Stderr = s.Stdin, stderr
		if opts.Stdin == nil {
			opts.Stdin = strings.NewReader("")
		}
	}
	req := r.d.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(r.ns).Name(r.name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{
			Container: runContainer, Stdin: opts.Stdin != nil, Stdout: true, Stderr: opts.Stderr != nil, TTY: cmd.Terminal,
		}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(r.d.cfg, http.MethodPost, req.URL())
	if err == nil {
		err = ex.StreamWithContext(ctx, opts)
	}
	var exit exec.CodeExitError
	if err != nil && !errors.As(err, &exit) && ctx.Err() == nil {
		fmt.Fprintf(stdout, "bex: attaching to pod %s/%s: %v\n", r.ns, r.name, err)
	}
}

// sizeQueue gives a terminal's first size, then those of sizes, until
// sizes is closed or done.
type sizeQueue struct {
	first runtime.TerminalSize
	sizes <-chan runtime.TerminalSize
	done  <-chan struct{}
	sent  bool
}

// Next implements remotecommand.TerminalSizeQueue; nil ends the sizes.
func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	if !q.sent {
		q.sent = true
		if q.first.Cols > 0 && q.first.Rows > 0 {
			return &remotecommand.TerminalSize{Width: q.first.Cols, Height: q.first.Rows}
		}
	}
	select {
	case s, ok := <-q.sizes:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: s.Cols, Height: s.Rows}
	case <-q.done:
		return nil
	}
}
