package buildagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client speaks to one build's agent.
type Client struct {
	// URL is the agent's base URL, http://host:port.
	URL   string
	Token string
	// Dir is the agent's work directory (its --dir).
	Dir string
	// HTTP is the client calls go through [http.DefaultClient].
	HTTP *http.Client
}

// ExitError is the error of a command that ran and did not succeed.
type ExitError struct {
	// Status is what ended it: "exit status 2", "signal: killed".
	Status string
}

func (e *ExitError) Error() string { return e.Status }

// Paths are the build's directories as the agent's steps see them.
func (c *Client) Paths() Paths { return PathsOf(c.Dir) }

// PutTree sends the checkout, a tar stream, to the agent.
func (c *Client) PutTree(ctx context.Context, tree io.Reader) error {
	resp, err := c.do(ctx, http.MethodPut, "/tree", tree)
	if err != nil {
		return fmt.Errorf("sending the tree to the build's agent: %w", err)
	}
	resp.Body.Close()
	return nil
}

// Tree returns the tree as the steps left it, a tar stream the caller
// closes.
func (c *Client) Tree(ctx context.Context) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, "/tree", nil)
	if err != nil {
		return nil, fmt.Errorf("reading the tree back from the build's agent: %w", err)
	}
	return resp.Body, nil
}

// Run runs cmd in the checkout and copies its output to out as it comes.
// A command that ran and failed returns an *ExitError; one the agent could
// not start, or whose answer was cut (the agent died), another error.
func (c *Client) Run(ctx context.Context, cmd Command, out io.Writer) error {
	body, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, "/run", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("running %s in the build's agent: %w", cmd.Argv[0], err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(out, resp.Body); err != nil {
		return fmt.Errorf("reading the output of %s from the build's agent: %w", cmd.Argv[0], err)
	}
	switch status := resp.Trailer.Get(ExitTrailer); {
	case status == "0":
		return nil
	case status == "":
		return fmt.Errorf("the build's agent ended %s without its exit status", cmd.Argv[0])
	case strings.HasPrefix(status, "start: "):
		return fmt.Errorf("starting %s: %s", cmd.Argv[0], strings.TrimPrefix(status, "start: "))
	default:
		return &ExitError{Status: status}
	}
}

func (c *Client) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(msg)))
	}
	return resp, nil
}
