package kube

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNewestKeptLines: what is kept of a replaced Pod's lines, or of an
// app's, is its newest lines within the line and byte bounds, whatever
// it wrote.
func TestNewestKeptLines(t *testing.T) {
	at := time.Date(2026, 12, 6, 18, 0, 0, 0, time.UTC)
	line := func(i, size int) keptLine {
		return keptLine{Pod: "web-1", Time: at.Add(time.Duration(i) * time.Millisecond), Text: strconv.Itoa(i) + strings.Repeat("x", size)}
	}
	var many []keptLine
	for i := range 3 * keptLogLines {
		many = append(many, line(i, 10))
	}
	got, size := newest(many)
	if len(got) != keptLogLines || got[0].Text != many[2*keptLogLines].Text || got[len(got)-1].Text != many[len(many)-1].Text {
		t.Errorf("of %d short lines: %d kept, from %q to %q; want the newest %d", len(many), len(got), got[0].Text, got[len(got)-1].Text, keptLogLines)
	}
	if size > keptLogBytes {
		t.Errorf("of %d short lines: %d bytes kept", len(many), size)
	}
	var big []keptLine
	for i := range 100 {
		big = append(big, line(i, keptLineBytes-10))
	}
	got, size = newest(big)
	if size > keptLogBytes || len(got) == 0 || got[len(got)-1].Text != big[len(big)-1].Text || len(got) != keptLogBytes/keptLineBytes {
		t.Errorf("of %d lines of 16 KiB: %d kept, %d bytes; want the newest within %d bytes", len(big), len(got), size, keptLogBytes)
	}
	// A slice of its own: appending to what was kept leaves lines alone.
	got, _ = newest(many[:10])
	_ = append(got[:5], line(-1, 1))
	if many[5].Text != "5xxxxxxxxxx" {
		t.Errorf("newest shares its answer's array with its argument: line 5 is now %q", many[5].Text)
	}
}
