package node

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/runtime/runtimetest"
)

// TestImageStoreCollect checks the store's garbage collection against a
// real registry: an image in use or unused for less than the minimum age
// stays, one unused for longer goes and is unpacked anew when asked for,
// and a get racing with collections never hands out a deleted directory.
func TestImageStoreCollect(t *testing.T) {
	dir := t.TempDir()
	reg, err := registry.New(filepath.Join(dir, "registry"), "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg.Handler())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/tenant-a/testapp:1"
	runtimetest.PushTestApp(t, ref, dir, registry.Auth("s3cret"), nil)

	s := newImageStore(filepath.Join(dir, "images"), secretKeychain{host: {Username: registry.Username, Password: "s3cret"}})
	log := testr.New(t)
	ctx := context.Background()
	app := func(img *image) string { return filepath.Join(img.dir, "testapp") }

	img, err := s.get(ctx, "tenant-a", ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.collect(log, 0)
	if _, err := os.Stat(app(img)); err != nil {
		t.Fatalf("an image in use was deleted: %v", err)
	}
	s.release(img)
	s.collect(log, time.Hour)
	if _, err := os.Stat(app(img)); err != nil {
		t.Fatalf("an image unused for less than the minimum age was deleted: %v", err)
	}
	s.collect(log, 0)
	if _, err := os.Stat(img.dir); !os.IsNotExist(err) {
		t.Fatalf("an unused image stayed: %v", err)
	}
	again, err := s.get(ctx, "tenant-a", ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(app(again)); err != nil {
		t.Fatalf("an image asked for after its deletion is not unpacked anew: %v", err)
	}
	s.release(again)

	// Gets and releases while collections delete whatever is unused.
	stop := make(chan struct{})
	var collector sync.WaitGroup
	collector.Add(1)
	go func() {
		defer collector.Done()
		for {
			select {
			case <-stop:
				return
			default:
				s.collect(log, 0)
			}
		}
	}()
	var users sync.WaitGroup
	for range 4 {
		users.Add(1)
		go func() {
			defer users.Done()
			for range 10 {
				img, err := s.get(ctx, "tenant-a", ref, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := os.Stat(app(img)); err != nil {
					t.Errorf("get handed out a deleted image: %v", err)
				}
				s.release(img)
			}
		}()
	}
	users.Wait()
	close(stop)
	collector.Wait()
	if s.removed < 2 {
		t.Errorf("%d images removed, want the first and at least one during the gets", s.removed)
	}
}
