package gitserver

import (
	"fmt"
	"io"

	"bex.co/bex/internal/bytesize"
)

const (
	// maxCommandBytes bounds the reference-update commands that start a
	// push, before its pack: about ten thousand refs.
	maxCommandBytes = 1 << 20
	// maxUploadRequestBytes bounds the body of one smart-HTTP fetch
	// request, wants and haves: about 300,000 of them.
	maxUploadRequestBytes = 16 << 20
)

// bodyTooLargeError is a request body, or a part of it, that went past its
// limit before anything was stored or answered: over HTTP it is answered
// 413.
type bodyTooLargeError struct {
	what  string // "the fetch request"
	limit string // "the 16 MiB limit"
}

func (e *bodyTooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s", e.what, e.limit)
}

// limitedReader reads at most limit bytes from r and then fails with a
// *bodyTooLargeError, where io.LimitReader would end silently.
type limitedReader struct {
	r    io.Reader
	left int64
	err  *bodyTooLargeError
	hit  bool // err was returned
}

// tooLarge returns the reader's error once it has been returned, whatever a
// decoder made of it.
func (l *limitedReader) tooLarge() *bodyTooLargeError {
	if l == nil || !l.hit {
		return nil
	}
	return l.err
}

// newLimitedReader bounds r to limit bytes; the error says what is larger
// than which limit, by default "the <limit> limit".
func newLimitedReader(r io.Reader, limit int64, what, limitText string) *limitedReader {
	if limitText == "" {
		limitText = "the " + bytesize.Format(limit) + " limit"
	}
	return &limitedReader{r: r, left: limit, err: &bodyTooLargeError{what: what, limit: limitText}}
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells a body of exactly the limit from a larger one.
		var b [1]byte
		if n, _ := l.r.Read(b[:]); n > 0 {
			l.hit = true
			return 0, l.err
		}
		return l.r.Read(p)
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
