// Package app reconciles App objects: it observes what an App refers to (the
// Secrets behind its env) and what has been built and released for it, and
// writes the App's conditions and observedGeneration.
//
// The build and release pipeline hands it facts through the App's status
// (currentRelease); it never starts builds itself.
package app
