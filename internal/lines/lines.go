package lines

import (
	"bytes"
	"sync"
)

// DefaultMax is the longest line a Writer keeps whole when Max is zero: the
// kubelet's and containerd's 16 KiB.
const DefaultMax = 16 << 10

// Writer is an io.Writer that calls Emit for each line written to it. It is
// safe for concurrent use; Emit is called with the Writer locked, one line
// at a time, and must not keep line.
type Writer struct {
	// Max is the longest line emitted whole [DefaultMax]; a longer one is
	// emitted in pieces of Max bytes, each but the last with partial set.
	Max int
	// Emit receives each line.
	Emit func(line []byte, partial bool)

	mu  sync.Mutex
	buf []byte
}

// Write emits the complete lines in p and keeps the rest for later.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	max := w.Max
	if max <= 0 {
		max = DefaultMax
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			w.cut(max, max)
			break
		}
		w.buf = append(w.buf, p[:i]...)
		w.cut(max, max+1)
		w.Emit(bytes.TrimSuffix(w.buf, []byte("\r")), false)
		w.buf = w.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

// cut emits pieces of max bytes while the buffer holds at least over.
func (w *Writer) cut(max, over int) {
	for len(w.buf) >= over {
		w.Emit(w.buf[:max], true)
		w.buf = append(w.buf[:0], w.buf[max:]...)
	}
}

// Flush emits a last line that had no newline.
func (w *Writer) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.Emit(w.buf, false)
		w.buf = w.buf[:0]
	}
}
