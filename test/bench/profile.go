package bench

import (
	"os"
	"runtime/pprof"
)

// StartCPUProfile starts a CPU profile of this process into path (""
// profiles nothing); the returned function stops it.
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
