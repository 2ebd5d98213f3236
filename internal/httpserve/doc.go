// Package httpserve holds what the platform's HTTP servers share about
// slow and idle clients: Timeouts, which each server (the API and
// dashboard, the git receiver, the edge, the ops listeners) sets in one
// place with the reasons for its values, and Stream, with which a handler
// whose response lasts (a log followed, a build's output) lifts the
// server's write deadline for that response only.
//
// httpserve/servetest plays the clients the timeouts are for: one that
// drips its headers (slow loris) and one that keeps an idle connection.
package httpserve
