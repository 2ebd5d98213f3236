package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/httpserve"
	"bex.co/bex/web/api/apiclient"
)

// events writes server-sent events.
type events struct {
	c echo.Context
}

func startEvents(c echo.Context) *events {
	httpserve.Stream(c.Response())
	h := c.Response().Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	c.Response().WriteHeader(http.StatusOK)
	c.Response().Flush()
	return &events{c: c}
}

// send writes one event; data may not hold a newline.
func (e *events) send(event, data string) error {
	data = strings.ReplaceAll(data, "\r", "")
	if _, err := fmt.Fprintf(e.c.Response(), "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	e.c.Response().Flush()
	return nil
}

// fail ends the stream with an "error" event saying what went wrong.
func (e *events) fail(err error) error {
	msg := "the stream broke: reload the page"
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		msg = ae.Message
	}
	_ = e.send("failed", msg)
	return err
}

// lineWriter sends each complete line written to it.
type lineWriter struct {
	send    func(string) error
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := strings.IndexByte(string(w.partial), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		if err := w.send(line); err != nil {
			return 0, err
		}
	}
}

// flush sends what is left after the last newline.
func (w *lineWriter) flush() error {
	if len(w.partial) == 0 {
		return nil
	}
	line := string(w.partial)
	w.partial = nil
	return w.send(line)
}

func asAPIError(err error, target **apiclient.Error) bool { return errors.As(err, target) }
