package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"bex.co/bex/web/api/apiclient"
)

// The run console on an app's page runs a command line in a fresh
// instance of the current release, as bex run does, through the API with
// the member's token. With the page's script it is attached: the command's
// output comes to the page as it comes and the lines typed there are its
// input, over a WebSocket (runConsole). Without the script, the form
// starts the command detached (startRun): its output goes to the app's
// log and its row under Runs says how it ended.
//
// The console is line by line, with no terminal: what the member types is
// sent once they press Enter, and programs that need a terminal (a
// full-screen editor, a password prompt) are bex run's, on a terminal.
const (
	// maxConsoleCommand is the most a console's command line may hold:
	// the API's limit on a run's arguments, less "/bin/sh -c".
	maxConsoleCommand = 16<<10 - 16
	// maxConsoleMessage is the most one message from the page may hold:
	// a line of input.
	maxConsoleMessage = 64 << 10
	// consolePing is how often the dashboard pings the page while a run
	// lasts, so that proxies that close idle connections keep it.
	consolePing = 30 * time.Second
)

// The page's and the dashboard's messages on a console's WebSocket. From
// the page: a binary message is input, the text message consoleEOF closes
// the input, and closing the WebSocket ends the run. From the dashboard:
// a binary message is output, its first byte the stream (consoleStdout,
// consoleStderr), and the last message is a text one, a consoleEnd.
const (
	consoleEOF    = "eof"
	consoleStdout = 1
	consoleStderr = 2
)

// consoleEnd is the last message of a console: how the command ended, or
// why it did not run (the API's refusal: no release, a viewer's token, a
// runtime that takes no input).
type consoleEnd struct {
	Exit  *apiclient.RunExit `json:"exit,omitempty"`
	Error string             `json:"error,omitempty"`
}

// consoleCommand is the command a console runs for the line typed: the
// line is given to /bin/sh, as a Procfile's lines are.
func consoleCommand(c echo.Context) ([]string, error) {
	line := strings.TrimSpace(c.FormValue("command"))
	switch {
	case line == "":
		return nil, &pageError{status: http.StatusUnprocessableEntity, title: "Nothing run", message: "The command is empty: type a command line, such as rake db:migrate."}
	case len(line) > maxConsoleCommand:
		return nil, &pageError{status: http.StatusUnprocessableEntity, title: "Nothing run",
			message: fmt.Sprintf("The command line holds %d bytes: at most %d; put a longer script in the app's code and run that.", len(line), maxConsoleCommand)}
	}
	return []string{"/bin/sh", "-c", line}, nil
}

// startRun starts the form's command detached: the form of a page
// without its script.
func (d *Dashboard) startRun(c echo.Context) error {
	name := c.Param("app")
	cmd, err := consoleCommand(c)
	if err != nil {
		return err
	}
	r, err := d.client(c).RunDetached(c.Request().Context(), name, apiclient.RunRequest{Command: cmd})
	if err != nil {
		return err
	}
	notice := fmt.Sprintf("Started run.%d in the background: its output is in the app's log as run.%d, and its row under Runs says how it ended.", r.Number, r.Number)
	return c.Redirect(http.StatusSeeOther, "/apps/"+url.PathEscape(name)+"?notice="+url.QueryEscape(notice)+"#runs")
}

// consoleOrigin says the WebSocket's handshake came from a page of this
// dashboard: a browser always sends Origin with one, and a page elsewhere
// (a tenant's app on a sibling hostname, whose requests carry the session
// cookie since it is same-site) has another.
func consoleOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && strings.EqualFold(u.Host, r.Host)
}

// runConsole runs the command of ?command= attached to the page over a
// WebSocket. The handshake must carry the session's CSRF secret (?csrf=)
// and come from this dashboard's origin; the API decides the rest.
func (d *Dashboard) runConsole(c echo.Context) error {
	r := c.Request()
	if !csrfOK(sessionOf(c), c.QueryParam("csrf")) {
		return &pageError{status: http.StatusForbidden, title: "Refused", message: "The console was not opened from this session's page: reload the page and try again."}
	}
	if !consoleOrigin(r) {
		return &pageError{status: http.StatusForbidden, title: "Refused", message: "The console opens from the dashboard's own pages only."}
	}
	cmd, err := consoleCommand(c)
	if err != nil {
		return err
	}
	up := websocket.Upgrader{CheckOrigin: consoleOrigin, ReadBufferSize: 4 << 10, WriteBufferSize: 32 << 10}
	conn, err := up.Upgrade(c.Response(), r, nil)
	if err != nil {
		// The upgrader answered the client already.
		d.log.V(1).Info("Refused a run console's handshake", "app", c.Param("app"), "err", err.Error())
		return nil
	}
	defer conn.Close()
	conn.SetReadLimit(maxConsoleMessage)

	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	ws := &consoleConn{conn: conn}
	stdin, input := io.Pipe()
	defer stdin.Close()
	go ws.readInput(input, cancel)
	go ws.ping(ctx)

	exit, err := d.client(c).Run(ctx, c.Param("app"), apiclient.RunRequest{Command: cmd},
		apiclient.RunStreams{Stdin: stdin, Stdout: ws.stream(consoleStdout), Stderr: ws.stream(consoleStderr)})
	end := consoleEnd{Exit: &exit}
	if err != nil {
		if ctx.Err() != nil {
			// The page closed the console: nobody to tell.
			return nil
		}
		end = consoleEnd{Error: err.Error()}
		var apiErr *apiclient.Error
		if errors.As(err, &apiErr) {
			end.Error = apiErr.Message
		}
	}
	msg, _ := json.Marshal(end)
	_ = ws.write(websocket.TextMessage, msg)
	// WriteControl may be called beside the other writes.
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(5*time.Second))
	return nil
}

// consoleConn is a console's WebSocket; its writes are one at a time.
type consoleConn struct {
	conn *websocket.Conn
	mu   sync.Mutex
}

func (w *consoleConn) write(kind int, p []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	return w.conn.WriteMessage(kind, p)
}

// stream is a writer of output messages of stream s.
func (w *consoleConn) stream(s byte) io.Writer { return consoleStream{w, s} }

type consoleStream struct {
	w *consoleConn
	s byte
}

func (s consoleStream) Write(p []byte) (int, error) {
	msg := make([]byte, 1+len(p))
	msg[0] = s.s
	copy(msg[1:], p)
	if err := s.w.write(websocket.BinaryMessage, msg); err != nil {
		return 0, err
	}
	return len(p), nil
}

// readInput copies the page's input into input until the page sends
// consoleEOF, and ends the run (cancel) when the page goes.
func (w *consoleConn) readInput(input *io.PipeWriter, cancel context.CancelFunc) {
	defer cancel()
	open := true
	for {
		kind, p, err := w.conn.ReadMessage()
		if err != nil {
			input.CloseWithError(err)
			return
		}
		switch {
		case kind == websocket.BinaryMessage && open:
			if _, err := input.Write(p); err != nil {
				open = false
			}
		case kind == websocket.TextMessage && string(p) == consoleEOF && open:
			input.Close()
			open = false
		}
	}
}

// ping pings the page every consolePing until ctx ends.
func (w *consoleConn) ping(ctx context.Context) {
	t := time.NewTicker(consolePing)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = w.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(10*time.Second))
		}
	}
}
