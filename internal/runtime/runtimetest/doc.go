// Package runtimetest holds what every runtime.Driver must pass:
// RunDriverSuite, the test app it deploys (./testapp, built by
// BuildTestApp), and the env knobs that make that app misbehave.
package runtimetest
