// Package faults tests that the embedded platform loses nothing when what
// it stands on fails: its private Postgres killed and kept down for a
// while, and bex-embedded itself killed in the middle of a build. Running
// apps keep answering over HTTPS, callers are told why they are refused,
// no build is left running, and the platform takes pushes again once the
// fault is over.
package faults
