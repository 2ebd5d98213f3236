// Package push_test is the core loop end to end, as a tenant runs it: the
// bex CLI creates an app, the real git client pushes it over HTTP and SSH to
// the embedded platform, and the app answers through the edge; then a second
// release under load, a push that does not compile, rollback, and the
// refusals (wrong token, another tenant's app, non-fast-forward, no such app).
package push_test
