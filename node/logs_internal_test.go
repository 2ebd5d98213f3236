package node

import (
	"net/url"
	"strings"
	"testing"
)

// TestLogStream: a log request's stream is the kubelet's (All, Stdout,
// Stderr; one of its own not with tailLines), and a request for one
// stream gets the lines of that stream only.
func TestLogStream(t *testing.T) {
	for _, c := range []struct {
		query, stream, err string
	}{
		{query: "", stream: ""},
		{query: "stream=All&tailLines=3", stream: ""},
		{query: "stream=Stdout", stream: "stdout"},
		{query: "stream=Stderr&follow=true", stream: "stderr"},
		{query: "stream=Stderr&tailLines=3", err: "tailLines cannot be asked with stream Stderr"},
		{query: "stream=stderr", err: `stream must be All, Stdout or Stderr, not "stderr"`},
	} {
		q, _ := url.ParseQuery(c.query)
		r, err := parseLogRequest(q)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %v, want an error saying %q", c.query, err, c.err)
		case c.err == "" && (err != nil || r.stream != c.stream):
			t.Errorf("%q: stream %q, %v; want %q", c.query, r.stream, err, c.stream)
		}
	}

	log := "2026-12-06T20:00:00.1Z stdout F out\n" +
		"2026-12-06T20:00:00.2Z stderr F err\n" +
		"2026-12-06T20:00:00.3Z stderr P cut \n" +
		"2026-12-06T20:00:00.4Z stdout F out again\n"
	for stream, want := range map[string]string{"": "out\nerr\ncut out again\n", "stdout": "out\nout again\n", "stderr": "err\ncut "} {
		var got strings.Builder
		for _, line := range strings.SplitAfter(log, "\n") {
			if out, ok := formatLine([]byte(line), logRequest{stream: stream}); ok {
				got.Write(out)
			}
		}
		if got.String() != want {
			t.Errorf("stream %q: %q, want %q", stream, got.String(), want)
		}
	}
}
