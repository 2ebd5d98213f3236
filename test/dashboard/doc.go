// Package dashboard holds browser tests (package dashboard_test) that
// drive the web dashboard and the operator console in headless Chromium (Debian's chromium, through chromedp): signing in,
// creating an app, a build log arriving live after a real git push, a
// rollback from the release list and from a release's page, a restart
// and a config release from the
// app page, tenants kept out of the console and of
// each other's apps, and an operator watching a running fleet upgrade's
// timeline and pausing it; an app page listing its one-off runs that run
// and a stopped run's end in the audit log; an admin inviting a member from the Team page,
// the member joining through the link, making and revoking a token on the
// Tokens page, and seeing no change offered once made a viewer. Each test saves a screenshot of its last page
// under out/screenshots/ and logs the path.
package dashboard
