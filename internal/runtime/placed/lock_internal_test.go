package placed

import (
	"fmt"
	"testing"
	"time"
)

// TestAppLocksAreDropped: an app's lock serialises its callers and is
// dropped once the last one let it go, so that the map of locks does not
// grow with every app the driver ever saw.
func TestAppLocksAreDropped(t *testing.T) {
	d := &Driver{locks: map[string]*appLock{}}
	unlock := d.lock("acme", "web")
	second := make(chan func())
	go func() { second <- d.lock("acme", "web") }()
	select {
	case <-second:
		t.Fatal("a second caller took the app's lock while the first held it")
	case <-time.After(100 * time.Millisecond):
	}
	for i := range 1000 {
		d.lock("acme", fmt.Sprintf("app-%d", i))()
	}
	unlock()
	(<-second)()
	if n := len(d.locks); n != 0 {
		t.Fatalf("%d app locks kept after every caller let go", n)
	}
}
