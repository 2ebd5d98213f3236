package childproc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// HTTPOK gets url with c and returns nil when it answers 200, else an
// error with the status and the first 4 KiB of the answer: the readiness
// check (/readyz, /health) of a child that serves HTTP, for WaitReady.
func HTTPOK(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
