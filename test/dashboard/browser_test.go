package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"bex.co/bex/test/platformtest"
)

// browser is one headless Chromium with one tab.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// chromium finds Debian's Chromium (or another Chrome) on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium on PATH: install Debian's chromium (apt-get install chromium); .ci/run does")
	return ""
}

// newBrowser starts Chromium for the test; it is stopped when t ends.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first Do starts the browser; it lives as long as bctx.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return &browser{t: t, ctx: bctx}
}

func (b *browser) timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, 90*time.Second)
}

// do runs steps, failing the test with what when they fail.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.timeout()
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v (page %s)", what, err, b.location())
	}
}

// networkChanged is the error Chromium gives a load it cancels because the
// machine's addresses changed. Other tests on the machine change them all
// the time: tenant sandboxes' veth pairs come and go, and local fleets add
// loopback addresses for their machines.
const networkChanged = "net::ERR_NETWORK_CHANGED"

// open loads url and returns the HTTP status of the document it ends on.
// A load Chromium cancelled with ERR_NETWORK_CHANGED is loaded again, as
// a user would reload it: it says nothing about the page, and opening a
// URL changes nothing on the server.
func (b *browser) open(url string) int {
	b.t.Helper()
	for try := 1; ; try++ {
		ctx, cancel := b.timeout()
		resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(url))
		cancel()
		if err != nil && strings.Contains(err.Error(), networkChanged) && try < 5 {
			b.t.Logf("opening %s: %v; loading it again", url, err)
			continue
		}
		if err != nil {
			b.t.Fatalf("opening %s: %v", url, err)
		}
		return status(resp)
	}
}

// clickAndLoad clicks sel, which loads another page (a link, a form's
// button), waits until that page has loaded and returns its status.
func (b *browser) clickAndLoad(what, sel string) int {
	b.t.Helper()
	ctx, cancel := b.timeout()
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("%s: %v (page %s)", what, err, b.location())
	}
	return status(resp)
}

func status(r *network.Response) int {
	if r == nil {
		return 0
	}
	return int(r.Status)
}

func (b *browser) location() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	return loc
}

// text returns the text of the first element sel matches.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel))
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := b.timeout()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v (page %s)", js, err, b.location())
	}
	return v
}

// waitFor polls a JavaScript condition until it is true or timeout passes;
// it fails t with the page's text.
func (b *browser) waitFor(what, js string, timeout time.Duration) {
	b.t.Helper()
	type seen struct {
		OK   bool   `json:"ok"`
		Body string `json:"body"`
	}
	platformtest.Eventually(b.t, timeout, what, func(context.Context) error {
		// chromedp runs under the browser's context, not the try's.
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[seen](fmt.Sprintf(`({ok: !!(%s), body: document.body ? document.body.innerText : ""})`, js)))
		switch {
		case err != nil:
			return fmt.Errorf("evaluating %s: %w (page %s)", js, err, b.location())
		case !got.OK:
			return fmt.Errorf("%s is false (page %s):\n%s", js, b.location(), got.Body)
		}
		return nil
	})
}

// screenshot saves the whole page as out/screenshots/<name>.png at the
// repository's root and logs the path.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := b.timeout()
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("taking a screenshot: %v", err)
	}
	dir := filepath.Join(platformtest.RepoRoot(b.t), "out", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

// signIn signs in on the dashboard at base with token and returns the
// status of the page it lands on.
func (b *browser) signIn(base, token string) int {
	b.t.Helper()
	b.open(base + "/signin")
	b.do("typing the token", chromedp.SetValue(chromedp.CSS("#token"), token))
	return b.clickAndLoad("signing in", "#signin")
}

// signOut submits the sign-out form.
func (b *browser) signOut() {
	b.t.Helper()
	b.clickAndLoad("signing out", "form.signout button")
}
