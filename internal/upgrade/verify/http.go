package verify

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// maxEvidence bounds a probe's message.
const maxEvidence = 512

// do sends one request and returns the status and the start of the body.
func do(ctx context.Context, client *http.Client, method, url string, body []byte) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	return resp.StatusCode, answer, nil
}

// Evidence returns a server's answer as one line of at most maxEvidence
// bytes: whitespace runs become one space, and a cut is marked with "…".
func Evidence(answer []byte) string {
	s := strings.Join(strings.Fields(string(answer)), " ")
	if len(s) <= maxEvidence {
		return s
	}
	cut := maxEvidence
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
