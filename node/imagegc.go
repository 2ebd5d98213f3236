package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"bex.co/bex/internal/every"
)

// maxImageGCRestarts is how often a panicking image collector starts again.
const maxImageGCRestarts = 3

// collect deletes the images no container has used for minAge, as the
// kubelet's image garbage collection does past its high threshold (here
// always: see docs/fleet.md). An image a Pod is unpacking, or that a get
// holds the key's lock for, is left for the next pass.
func (s *imageStore) collect(log logr.Logger, minAge time.Duration) {
	type candidate struct {
		key  string
		lock *sync.Mutex
	}
	now := time.Now()
	var candidates []candidate
	s.mu.Lock()
	for key, img := range s.images {
		if img.users == 0 && now.Sub(img.unusedSince) >= minAge {
			candidates = append(candidates, candidate{key: key, lock: s.locks[key]})
		}
	}
	s.mu.Unlock()
	for _, c := range candidates {
		// A get holding the lock is unpacking the image or about to use
		// it: not now.
		if !c.lock.TryLock() {
			continue
		}
		s.mu.Lock()
		img, ok := s.images[c.key]
		if ok && (img.users > 0 || time.Since(img.unusedSince) < minAge) {
			ok = false // taken again since
		}
		if ok {
			// From here, a get for the key waits on its lock and unpacks
			// the image anew.
			delete(s.images, c.key)
		}
		s.mu.Unlock()
		if !ok {
			c.lock.Unlock()
			continue
		}
		unused := time.Since(img.unusedSince).Round(time.Second)
		// Should the removal fail, the next get of the image removes what
		// is left before it unpacks, as does the next agent's start.
		err := os.RemoveAll(img.dir)
		c.lock.Unlock()
		if err != nil {
			log.Error(err, "Removing an unused image", "tenant", img.tenant, "image", img.ref)
			continue
		}
		s.mu.Lock()
		s.removed++
		removed := s.removed
		s.mu.Unlock()
		log.Info("Removed an unused image", "tenant", img.tenant, "image", img.ref, "unusedFor", unused.String(), "imagesRemoved", removed)
	}
}

// sweepImages removes the images an earlier agent unpacked under dir but
// those of the containers this one adopts (keep): a new store knows none
// of the others and unpacks its images anew.
func sweepImages(dir string, keep map[string]bool) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if keep[p] {
			continue
		}
		n++
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// collectImages runs an image garbage collection pass every ImageGCPeriod
// until ctx ends. A panic starts the loop again, a few times.
func (a *Agent) collectImages(ctx context.Context) {
	log := a.opts.Log.WithValues("node", a.opts.NodeName)
	collect := func() bool {
		a.images.collect(log, a.opts.ImageMinimumGCAge)
		return true
	}
	if !every.Run(ctx, log, "Image collector", a.opts.ImageGCPeriod, maxImageGCRestarts, collect) {
		log.Error(nil, "Image collector keeps panicking; unused images stay until the agent starts again")
	}
}
