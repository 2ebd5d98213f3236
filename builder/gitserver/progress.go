package gitserver

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
)

// chunk is the largest payload written in one side-band-64k packet: well
// below its limit and pktline.MaxPayloadSize. With side-band, git's packets
// are at most 1000 bytes with their length and band (sidebandChunk of data).
const (
	chunk         = 8 << 10
	sidebandChunk = sideband.MaxPackedSize - 4 - 1
)

// sidebandWriter multiplexes the receive-pack response: the report-status on
// band 1 and progress (the deploy log, the receiver's messages) on band 2,
// flushing each packet to the client as it is written. Without side-band the
// report is written as is and progress is dropped, as git does. It is safe for
// concurrent use.
type sidebandWriter struct {
	mu     sync.Mutex
	w      io.Writer
	mux    *sideband.Muxer // nil without side-band
	chunk  int             // largest data payload of one packet
	flush  func()
	last   time.Time // last packet sent
	err    error     // first write error: the client is gone
	closed bool      // progress no longer accepted
	pings  int       // keep-alive packets sent
}

func newSidebandWriter(w io.Writer, flush func(), t sideband.Type, enabled bool) *sidebandWriter {
	sw := &sidebandWriter{w: w, flush: flush, last: time.Now(), chunk: chunk}
	if t == sideband.Sideband {
		sw.chunk = sidebandChunk
	}
	if enabled {
		sw.mux = sideband.NewMuxer(t, w)
	}
	return sw
}

// Write sends p as progress. It never fails: a client that went away is
// noticed through the request context, and the deploy log must not break
// because of it.
func (sw *sidebandWriter) Write(p []byte) (int, error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.closed {
		return len(p), nil
	}
	sw.send(sideband.ProgressMessage, p)
	return len(p), nil
}

// Printf sends one progress line.
func (sw *sidebandWriter) Printf(format string, args ...any) {
	_, _ = fmt.Fprintf(sw, format+"\n", args...)
}

// send writes p on band ch in chunks; the caller holds mu.
func (sw *sidebandWriter) send(ch sideband.Channel, p []byte) {
	if sw.mux == nil || sw.err != nil {
		return
	}
	if len(p) == 0 {
		// The muxer writes nothing for an empty payload; a keep-alive is
		// exactly that: a packet holding only the band number.
		if err := pktline.NewEncoder(sw.w).Encode(ch.WithPayload(nil)); err != nil {
			sw.err = err
			return
		}
	}
	for len(p) > 0 {
		n := min(len(p), sw.chunk)
		if _, err := sw.mux.WriteChannel(ch, p[:n]); err != nil {
			sw.err = err
			return
		}
		p = p[n:]
	}
	sw.last = time.Now()
	sw.flush()
}

// keepAlive sends an empty progress packet whenever nothing was sent for
// interval, until ctx is done, so that proxies and the client do not drop a
// connection while a quiet build runs. An empty band-2 packet prints nothing.
func (sw *sidebandWriter) keepAlive(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sw.mu.Lock()
			if !sw.closed && time.Since(sw.last) >= interval {
				sw.send(sideband.ProgressMessage, nil)
				sw.pings++
			}
			sw.mu.Unlock()
		}
	}
}

// finish writes the report-status (encoded by report) and closes the
// response: on band 1 followed by a flush-pkt with side-band, as is without.
// Progress written afterwards is discarded.
func (sw *sidebandWriter) finish(report func(io.Writer) error) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.closed = true
	if sw.err != nil {
		return fmt.Errorf("writing progress: %w", sw.err)
	}
	if sw.mux == nil {
		if err := report(sw.w); err != nil {
			return fmt.Errorf("writing report: %w", err)
		}
		sw.flush()
		return nil
	}
	if err := report(&bandWriter{sw: sw}); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	if sw.err != nil {
		return fmt.Errorf("writing report: %w", sw.err)
	}
	if err := pktline.NewEncoder(sw.w).Flush(); err != nil {
		return fmt.Errorf("writing flush: %w", err)
	}
	sw.flush()
	return nil
}

// bandWriter writes on band 1; its caller holds sw.mu.
type bandWriter struct{ sw *sidebandWriter }

func (b *bandWriter) Write(p []byte) (int, error) {
	b.sw.send(sideband.PackData, p)
	if b.sw.err != nil {
		return 0, b.sw.err
	}
	return len(p), nil
}
