package app

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

// Pause, resume and abort are one command each, made by
// newUpgradeChangeCommand: they differ only in the call and the words.

func newUpgradePauseCommand(st *state) *cobra.Command {
	return newUpgradeChangeCommand(st, "pause", "paused",
		"Hold a fleet upgrade at the next machine boundary; bex upgrade resume goes on (operators)", (*apiclient.Client).PauseUpgrade)
}

func newUpgradeResumeCommand(st *state) *cobra.Command {
	return newUpgradeChangeCommand(st, "resume", "resumed",
		"Go on with a paused fleet upgrade; an aborted one cannot be resumed (operators)", (*apiclient.Client).ResumeUpgrade)
}

func newUpgradeAbortCommand(st *state) *cobra.Command {
	return newUpgradeChangeCommand(st, "abort", "aborted",
		"Stop a fleet upgrade for good: it cannot be resumed, and a cluster mid-rollout stays paused at mixed versions (operators)", (*apiclient.Client).AbortUpgrade)
}

func newUpgradeChangeCommand(st *state, verb, done, short string,
	call func(*apiclient.Client, context.Context, string) (apiclient.UpgradeChange, error)) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			ch, err := call(c, cmd.Context(), args[0])
			if err != nil {
				return explain(err)
			}
			return st.render(ch, func(w io.Writer) error { return renderUpgradeChange(w, verb, done, ch) })
		},
	}
}

// renderUpgradeChange says what the change did and what happens now.
func renderUpgradeChange(w io.Writer, verb, done string, ch apiclient.UpgradeChange) error {
	name := ch.Upgrade.Name
	var err error
	switch {
	case ch.Changed:
		_, err = fmt.Fprintf(w, "Fleet upgrade %s %s.\n", name, ch.Message)
	case verb == "resume":
		_, err = fmt.Fprintf(w, "Fleet upgrade %s is %s.\n", name, ch.Message)
	default:
		_, err = fmt.Fprintf(w, "Fleet upgrade %s was %s already: nothing changed.\n", name, done)
	}
	return err
}
