package storagetest_test

import (
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"bex.co/bex/internal/certstore/storagetest"
)

// fileStorageStaleAfter is how long FileStorage leaves a crashed holder's
// lock in place: it is stale 10 s (twice its 5 s refresh) after the last
// refresh, and waiters look every second.
const fileStorageStaleAfter = 11 * time.Second

// TestFileStorage proves the suite against the reference implementation,
// certmagic's FileStorage.
//
// Each instance reaches the shared directory through a symbolic link of its
// own. Crash removes an instance's link: its lock refresher, which finds the
// lock file by that path, finds nothing and stops, and the lock file stays
// behind, as when the holder's machine goes away.
func TestFileStorage(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storagetest.Backend {
		root := t.TempDir()
		shared := filepath.Join(root, "shared")
		if err := os.Mkdir(shared, 0o700); err != nil {
			t.Fatal(err)
		}
		var instances atomic.Int32
		return storagetest.Backend{
			New: func(t *testing.T) certmagic.Storage {
				link := filepath.Join(root, "instance"+strconv.Itoa(int(instances.Add(1))))
				if err := os.Symlink(shared, link); err != nil {
					t.Fatal(err)
				}
				return &certmagic.FileStorage{Path: link}
			},
			Crash: func(t *testing.T, s certmagic.Storage) {
				if err := os.Remove(s.(*certmagic.FileStorage).Path); err != nil {
					t.Fatal(err)
				}
			},
			StaleAfter: fileStorageStaleAfter,
		}
	})
}
