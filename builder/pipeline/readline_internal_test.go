package pipeline

import (
	"bufio"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestReadLine: a line longer than the kept length is cut and the rest of it
// skipped, and the lines after it are still read (bufio.Scanner stopped at
// the first line over its buffer, and the rest of the log was lost).
func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	in := "one\r\n" + long + "\n\nlast"
	br := bufio.NewReaderSize(strings.NewReader(in), 16)
	var got []string
	for {
		line, err := readLine(br, 10)
		if line != "" || err == nil {
			got = append(got, line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
	}
	want := []string{"one", "xxxxxxxxxx", "", "last"}
	if !slices.Equal(got, want) {
		t.Errorf("lines = %q, want %q", got, want)
	}
}
