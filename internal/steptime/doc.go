// Package steptime records how long the steps of one piece of work took
// (a push: checkout, app build, image, registry push, unpack, start,
// health check, switch), across the packages that do them. The caller
// that owns the work puts a Timeline in the context (New); each package
// times its own steps with Start, which does nothing for a context
// without a Timeline. The pipeline prints the result in the push output
// and keeps it in the build record.
package steptime
