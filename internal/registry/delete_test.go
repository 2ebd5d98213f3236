package registry_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"bex.co/bex/internal/registry"
)

// TestDeleteByDigestDeletesTheImage: deleting a manifest by digest (as the
// release pipeline prunes an image) takes its tags and the blobs no other
// manifest refers to with it, once they are older than BlobGrace; a blob
// looked at or written within it stays.
func TestDeleteByDigestDeletesTheImage(t *testing.T) {
	dir := t.TempDir()
	addr, stop := serve(t, dir)
	push := func(tag string) (v1.Image, name.Digest) {
		t.Helper()
		img, err := random.Image(256, 2)
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := name.NewTag(addr + "/acme/web:" + tag)
		if err := remote.Write(ref, img, auth); err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		return img, ref.Context().Digest(d.String())
	}
	old, oldRef := push("old")
	fresh, freshRef := push("fresh")
	kept, _ := push("kept")
	blobs := filepath.Join(dir, "blobs", "sha256")
	ageBlobs := func() {
		t.Helper()
		past := time.Now().Add(-2 * registry.BlobGrace)
		entries, err := os.ReadDir(blobs)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.Chtimes(filepath.Join(blobs, e.Name()), past, past); err != nil {
				t.Fatal(err)
			}
		}
	}
	blobsOf := func(img v1.Image) []string {
		t.Helper()
		cfg, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		out := []string{cfg.Hex}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			d, err := l.Digest()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d.Hex)
		}
		return out
	}
	exists := func(hex string) bool {
		_, err := os.Stat(filepath.Join(blobs, hex))
		return err == nil
	}
	gone := func(ref string) bool {
		t.Helper()
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		_, err = remote.Head(r, auth)
		var terr *transport.Error
		return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
	}

	ageBlobs()
	if err := remote.Delete(oldRef, auth); err != nil {
		t.Fatalf("deleting %s: %v", oldRef, err)
	}
	// A push of an image with fresh's blobs finds them (and does not upload
	// them again) just before fresh is deleted: the grace keeps them.
	for _, hex := range blobsOf(fresh) {
		req, err := http.NewRequest(http.MethodHead, "http://"+addr+"/v2/acme/web/blobs/sha256:"+hex, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(registry.Username, testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("HEAD blob %s: %d", hex, resp.StatusCode)
		}
	}
	if err := remote.Delete(freshRef, auth); err != nil {
		t.Fatalf("deleting %s: %v", freshRef, err)
	}
	for _, check := range []func(){func() {}, func() { stop(); addr, _ = serve(t, dir) }} {
		check() // then again after a restart
		for _, ref := range []string{addr + "/acme/web:old", addr + "/acme/web@" + oldRef.DigestStr(), addr + "/acme/web:fresh"} {
			if !gone(ref) {
				t.Errorf("%s is still there after its digest was deleted", ref)
			}
		}
		for _, hex := range blobsOf(old) {
			if exists(hex) {
				t.Errorf("blob %s of the deleted image is still there", hex)
			}
		}
		for _, img := range []v1.Image{kept, fresh} {
			for _, hex := range blobsOf(img) {
				if !exists(hex) {
					t.Errorf("blob %s of a kept image or one within the grace is gone", hex)
				}
			}
		}
		if gone(addr + "/acme/web:kept") {
			t.Errorf("the kept image is gone")
		}
	}
}
