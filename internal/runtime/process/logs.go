package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"bex.co/bex/internal/runtime"
)

// maxLogFile is the size at which an app's log file is rotated to "<name>.1".
const maxLogFile = 10 << 20

// subBuffer is how many lines a follower may lag before lines are dropped
// for it; a slow reader never blocks the app's output.
const subBuffer = 1024

// logBuffer keeps an app's last lines, appends them to a file and fans them
// out to followers.
type logBuffer struct {
	mu     sync.Mutex
	lines  []runtime.LogLine // ring
	next   int
	full   bool
	subs   map[chan runtime.LogLine]struct{}
	path   string
	file   *os.File
	size   int64
	closed bool
}

func newLogBuffer(size int, path string) *logBuffer {
	b := &logBuffer{lines: make([]runtime.LogLine, size), subs: map[chan runtime.LogLine]struct{}{}, path: path}
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err == nil {
			if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640); err == nil {
				b.file = f
				if st, err := f.Stat(); err == nil {
					b.size = st.Size()
				}
			}
		}
	}
	return b
}

func (b *logBuffer) add(l runtime.LogLine) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.lines[b.next] = l
	b.next = (b.next + 1) % len(b.lines)
	if b.next == 0 {
		b.full = true
	}
	if b.file != nil {
		n, _ := fmt.Fprintf(b.file, "%s %s[%s] %s: %s\n", l.Time.UTC().Format(time.RFC3339Nano), l.Process, fmt.Sprint(l.Instance), l.Stream, l.Text)
		b.size += int64(n)
		if b.size > maxLogFile {
			b.rotate()
		}
	}
	for ch := range b.subs {
		select {
		case ch <- l:
		default:
		}
	}
}

func (b *logBuffer) rotate() {
	b.file.Close()
	b.file = nil
	if err := os.Rename(b.path, b.path+".1"); err != nil {
		return
	}
	if f, err := os.OpenFile(b.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640); err == nil {
		b.file, b.size = f, 0
	}
}

// tail returns the last n lines (all when n < 0) and, with follow, a channel
// of the lines added after them.
func (b *logBuffer) tail(n int, follow bool) ([]runtime.LogLine, chan runtime.LogLine) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var all []runtime.LogLine
	if b.full {
		all = append(all, b.lines[b.next:]...)
	}
	all = append(all, b.lines[:b.next]...)
	if n >= 0 && len(all) > n {
		all = all[len(all)-n:]
	}
	var ch chan runtime.LogLine
	if follow && !b.closed {
		ch = make(chan runtime.LogLine, subBuffer)
		b.subs[ch] = struct{}{}
	}
	return all, ch
}

func (b *logBuffer) unsubscribe(ch chan runtime.LogLine) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[ch]; ok {
		delete(b.subs, ch)
		close(ch)
	}
}

// close ends every follower and closes the file; remove deletes it too.
func (b *logBuffer) close(remove bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for ch := range b.subs {
		delete(b.subs, ch)
		close(ch)
	}
	if b.file != nil {
		b.file.Close()
	}
	if remove && b.path != "" {
		os.Remove(b.path)
		os.Remove(b.path + ".1")
	}
}

// stream sends lines, then (when sub is not nil) what sub delivers, until
// ctx ends or sub is closed; then it closes the returned channel.
func (b *logBuffer) stream(ctx context.Context, lines []runtime.LogLine, sub chan runtime.LogLine) <-chan runtime.LogLine {
	out := make(chan runtime.LogLine)
	go func() {
		defer close(out)
		if sub != nil {
			defer b.unsubscribe(sub)
		}
		for _, l := range lines {
			select {
			case out <- l:
			case <-ctx.Done():
				return
			}
		}
		if sub == nil {
			return
		}
		for {
			select {
			case l, ok := <-sub:
				if !ok {
					return
				}
				select {
				case out <- l:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
