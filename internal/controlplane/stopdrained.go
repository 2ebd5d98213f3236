package controlplane

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"time"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/tcplb"
)

// StopDrained stops the kube-apiserver proc, listening on addr, that lb
// has taken out of its rotation and drained, so that no request on a
// connection a client kept open past the drain reaches it while it shuts
// down. From SIGTERM until its pre-shutdown hooks end, kube-apiserver
// serves requests as usual, except that one of those hooks has already
// closed its peer-endpoint store: every request it would proxy to a peer
// gets "503 Error getting ip and port info" (1.35 to 1.37; see
// docs/upgrades.md). Only once the hooks have ended does it turn requests
// away, with 429 and Retry-After (--shutdown-send-retry-after) or 503 and
// Retry-After, while its requests in flight end; then it stops listening
// and ends its connections: an HTTP/2 GOAWAY, after which the client sends
// again on a new connection what the server did not take, and a close of
// an idle HTTP/1.1 connection.
//
// So the connections left are held (tcplb.LB.Hold) from just before
// SIGTERM until the server turns a probe of its own address away, stops
// listening or exits: the requests its clients send meanwhile then get
// the Retry-After or the GOAWAY, and client-go sends them again, to
// another server, where a close of the connections would fail a write in
// flight (a write held on an HTTP/1.1 connection still fails). Then the
// server has grace to exit before SIGKILL. tlsConfig is for the probe,
// which needs no credentials (the server turns it away before
// authentication). With no connection open it is a plain stop.
func StopDrained(lb *tcplb.LB, addr string, proc *childproc.Process, grace time.Duration, tlsConfig *tls.Config, log io.Writer, what string) {
	if proc == nil || proc.Exited() {
		return
	}
	held, release := 0, func() {}
	if lb != nil {
		held, release = lb.Hold(addr)
	}
	defer release()
	start := time.Now()
	proc.Terminate()
	if held > 0 {
		how := awaitTurnAway(proc, addr, grace, tlsConfig)
		release()
		fmt.Fprintf(log, "%s: held what clients sent on %d connections left after its drain for %.2f s from SIGTERM, until it %s\n",
			what, held, time.Since(start).Seconds(), how)
	}
	proc.WaitOrKill(max(grace-time.Since(start), time.Second))
}

// awaitTurnAway probes the stopping kube-apiserver at addr every 10 ms
// until it turns the probe away (429 or 503 with Retry-After) or refuses
// the connection, it exits, or limit passes, and says which.
func awaitTurnAway(proc *childproc.Process, addr string, limit time.Duration, tlsConfig *tls.Config) string {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		TLSClientConfig: tlsConfig, DisableKeepAlives: true}}
	deadline := time.After(limit)
	for {
		resp, err := client.Get("https://" + addr + "/version")
		switch {
		case err == nil:
			resp.Body.Close()
			// 429 with --shutdown-send-retry-after; without it, 503 with
			// Retry-After ("apiserver is shutting down") as it stops
			// listening.
			turnedAway := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
			if turnedAway && resp.Header.Get("Retry-After") != "" {
				return fmt.Sprintf("answered %d with Retry-After", resp.StatusCode)
			}
		case errors.Is(err, syscall.ECONNREFUSED):
			return "stopped listening"
		}
		select {
		case <-proc.Done():
			return "exited"
		case <-deadline:
			return fmt.Sprintf("did not turn requests away within %s", limit)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
