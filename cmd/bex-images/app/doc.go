// Package app is the bex-images command: its flags, and the wiring of
// internal/images to a checkout of bex, the chart's appVersion (the default
// tag) and the registry credentials of the docker config. It builds and
// pushes the images the chart deploy/chart/bex runs, so that an install
// finds <global.imageRegistry>/<repository>:<appVersion> for every
// component.
package app
