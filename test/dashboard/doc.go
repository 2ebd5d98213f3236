// Package dashboard holds browser tests (package dashboard_test) that
// drive the web dashboard and the operator console in headless Chromium (Debian's chromium, through chromedp): signing in,
// creating an app, a build log arriving live after a real git push, a
// rollback from the release list, a restart and a config release from the
// app page, tenants kept out of the console and of
// each other's apps, and an operator watching a running fleet upgrade's
// timeline and pausing it. Each test saves a screenshot of its last page
// under out/screenshots/ and logs the path.
package dashboard
