// Package dashboard is the platform's web pages: the tenant dashboard
// (apps, the cluster each runs on and why, releases with rollback and a
// page each, builds
// with their logs streamed live, runtime logs, environment, routes,
// traffic), the Team page (members, roles, invitations), the Tokens page
// and the Join page that accepts an invitation, and the operator console
// (the fleet's control planes and MVP readiness, cordon and uncordon of
// its clusters, fleet upgrades with a live
// timeline of versions and probe outcomes per apiserver, pause, resume and
// abort, and the audit log).
//
// The pages are rendered on the server with html/template and read without
// JavaScript; a small script (static/app.js) refreshes the live parts,
// streams logs with server-sent events and runs the app page's console
// attached over a WebSocket that the dashboard relays to the API's run
// protocol (runconsole.go; without the script the console's form runs the
// command detached). Every read and every change goes
// through the platform's JSON API (web/api) with the signed-in user's
// token, so the API's rules are the only rules: a tenant sees only its own
// apps, and the console needs an operator's token.
//
// A tenant's pages offer only the forms the member's role may use, as the
// API says at every page (whoami); the API refuses a forged one anyway.
//
// Sign-in takes an API token; joining with an invitation's code signs the
// new member in with their first token. The session is a cookie sealed with
// AES-GCM under Options.CookieKey: it holds the token, whom it acts for and
// a CSRF secret, and it is HttpOnly, SameSite=Lax and Secure. Every form carries the CSRF secret, and a
// change without it is refused with 403.
package dashboard
