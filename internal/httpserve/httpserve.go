package httpserve

import (
	"net/http"
	"time"
)

// Timeouts are an http.Server's limits on slow and idle clients. Zero
// means no limit, which only Read and Write may be, and only with a reason
// written where the server's Timeouts are.
type Timeouts struct {
	// ReadHeader bounds the request line and headers, from the first byte:
	// a client that drips them (slow loris) is disconnected.
	ReadHeader time.Duration
	// Read bounds the whole request, body included.
	Read time.Duration
	// Write bounds the response, from the end of the request's headers.
	// A streaming handler lifts it for its own response with Stream.
	Write time.Duration
	// Idle bounds the wait for the next request on a kept-alive
	// connection.
	Idle time.Duration
}

// OpsTimeouts are the limits of a listener of /metrics and probes
// (/healthz, /readyz): scrapers and kubelets send small requests at once,
// and readiness checks take at most 5 s.
func OpsTimeouts() Timeouts {
	return Timeouts{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 15 * time.Second, Idle: 60 * time.Second}
}

// Server returns a server of h with t.
func (t Timeouts) Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
	}
}

// Stream lifts the server's write deadline for w's response, which lasts
// as long as what it streams; call it before the first write. The stream
// still ends when the client goes away (the request's context). A writer
// that cannot set deadlines (a test recorder) is left as it is.
func Stream(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
}

// RolloutPatience is how long an answer that waits for a rollout (a
// rollback, a restart, a config release) may take to write: the runtime's
// own deadlines (60 s for a process to start, 11 min for a kube rollout)
// end the wait first.
const RolloutPatience = 15 * time.Minute

// AwaitRollout moves the server's write deadline for w's response to
// RolloutPatience from now: the answer comes once a rollout has ended.
// Call it before the wait. A writer that cannot set deadlines is left as
// it is.
func AwaitRollout(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(RolloutPatience))
}
