package api

import (
	"time"

	"bex.co/bex/internal/httpserve"
)

// ServerTimeouts are the limits of the server that serves the API and the
// dashboard (bex-web, make run):
//   - ReadHeader 10 s: a browser or the CLI sends its headers at once; a
//     client dripping them is an attack (slow loris).
//   - Read 30 s: request bodies are JSON of at most 1 MiB or a dashboard
//     form.
//   - Write 60 s: every answer but a stream is one JSON document or page.
//     The streams (build logs and app logs with follow=true, the
//     dashboard's server-sent events) lift it with httpserve.Stream and
//     end when the client goes away.
//   - Idle 120 s: a kept-alive connection waiting for its next request;
//     the dashboard's pages refresh every 2 to 4 s.
func ServerTimeouts() httpserve.Timeouts {
	return httpserve.Timeouts{
		ReadHeader: 10 * time.Second,
		Read:       30 * time.Second,
		Write:      60 * time.Second,
		Idle:       120 * time.Second,
	}
}
