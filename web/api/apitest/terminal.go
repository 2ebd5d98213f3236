package apitest

import (
	"context"
	"fmt"
	"io"
	"regexp"
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

// TerminalDialogue drives a run of TerminalScript on a terminal of 80
// columns by 24 rows: it waits for the command to name its terminal (a
// /dev/pts/N), types a line and waits for its answer, asks the size (24
// 80), calls resize to make the terminal 100 by 40 and asks again until
// stty says 40 100, types a last line and waits for its answer (so that
// no stty runs when the interrupt comes: sh (dash) may die of one that
// comes as it starts a command, without its trap), then types Ctrl-C.
// screen is what the terminal has shown, keys where typing goes. The
// caller waits for the run's end and checks the rest of what screen
// shows: the line typed is "keystrokes".
func TerminalDialogue(t testing.TB, screen fmt.Stringer, keys io.Writer, resize func(cols, rows uint16)) {
	t.Helper()
	typeKeys := func(s string) {
		t.Helper()
		if _, err := io.WriteString(keys, s); err != nil {
			t.Fatal(err)
		}
	}
	AwaitTerminal(t, "the command to name its terminal", screen, keys, "", "\n")
	if !regexp.MustCompile(`^/dev/pts/\d+\r`).MatchString(screen.String()) {
		t.Fatalf("tty printed %q, want a /dev/pts/N terminal", screen.String())
	}
	typeKeys("keystrokes\r")
	AwaitTerminal(t, "the line typed", screen, keys, "", "got 10 characters")
	AwaitTerminal(t, "the terminal's first size", screen, keys, "size\r", "24 80")
	resize(100, 40)
	// The resize and the keystrokes go their own ways: typed again until
	// stty sees the new size.
	AwaitTerminal(t, "the resize to reach the terminal", screen, keys, "size\r", "40 100")
	typeKeys("done\r")
	AwaitTerminal(t, "the lines typed to be answered", screen, keys, "", "got 4 characters")
	typeKeys("\x03")
}
