package lines

import (
	"fmt"
	"slices"
	"testing"
)

func TestWriter(t *testing.T) {
	var got []string
	w := &Writer{Max: 4, Emit: func(line []byte, partial bool) {
		got = append(got, fmt.Sprintf("%s/%t", line, partial))
	}}
	for _, s := range []string{"ab", "c\r\nde", "fghij\n", "\n", "xy"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	before := len(got)
	w.Flush()
	w.Flush()
	want := []string{
		"abc/false", // "\r\n" ends it
		"defg/true", // cut at Max
		"hij/false", // the rest of the long line
		"/false",    // an empty line
		"xy/false",  // flushed
	}
	if !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
	if before != 4 {
		t.Errorf("%d lines before Flush, want 4: the unfinished one waits", before)
	}
}
