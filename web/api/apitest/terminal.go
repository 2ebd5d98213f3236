package apitest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"bex.co/bex/test/platformtest"
)

// TerminalScript is the command of a test's run on a terminal
// (Options.Sandbox), for sh -c: it names its terminal (tty), then answers
// each line typed, "size" with the terminal's size (stty size: rows,
// columns) and any other with its length ("got 10 characters"); the
// terminal's interrupt (Ctrl-C) makes it say "caught INT" and exit 9.
const TerminalScript = `trap 'echo "caught INT"; exit 9' INT
tty
while read -r line; do
	if [ "$line" = size ]; then stty size; else echo "got ${#line} characters"; fi
done`

// AwaitTerminal waits, up to a minute, until screen (what the run's
// terminal has shown) holds want, typing typing into keys first, and
// again at each look, when it is not empty; the test fails saying what it
// waited for and what the terminal shows.
func AwaitTerminal(t testing.TB, what string, screen fmt.Stringer, keys io.Writer, typing, want string) {
	t.Helper()
	platformtest.Eventually(t, time.Minute, what, func(context.Context) error {
		if typing != "" {
			if _, err := io.WriteString(keys, typing); err != nil {
				return err
			}
		}
		if !strings.Contains(screen.String(), want) {
			return fmt.Errorf("the terminal shows %q, want %q in it", screen.String(), want)
		}
		return nil
	})
}
