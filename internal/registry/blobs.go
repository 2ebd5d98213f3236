package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// diskBlobs keeps blobs content-addressed in dir. The registry verifies an
// upload's digest while Put reads it, so a blob only gets its final name once
// it was read whole and matched; a failed upload leaves nothing behind.
type diskBlobs struct {
	dir string // <registry>/blobs
	tmp string // same file system as dir, for the rename
}

var (
	_ ggcrregistry.BlobHandler       = (*diskBlobs)(nil)
	_ ggcrregistry.BlobStatHandler   = (*diskBlobs)(nil)
	_ ggcrregistry.BlobPutHandler    = (*diskBlobs)(nil)
	_ ggcrregistry.BlobDeleteHandler = (*diskBlobs)(nil)
)

func (d *diskBlobs) path(h v1.Hash) (string, error) {
	if !digestPattern.MatchString(h.String()) {
		return "", fmt.Errorf("%w: unsupported digest %s", ggcrregistry.ErrNotFound, h)
	}
	return filepath.Join(d.dir, h.Algorithm, h.Hex), nil
}

func (d *diskBlobs) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	p, err := d.path(h)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, ggcrregistry.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	// A push that finds the blob here does not upload it again: the blob
	// counts as new for the registry's BlobGrace, until the manifest that
	// refers to it is put.
	now := time.Now()
	if err := os.Chtimes(p, now, now); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	return fi.Size(), nil
}

func (d *diskBlobs) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	p, err := d.path(h)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ggcrregistry.ErrNotFound
	}
	return f, err
}

func (d *diskBlobs) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	p, err := d.path(h)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return writeAtomic(d.tmp, p, rc)
}

func (d *diskBlobs) Delete(_ context.Context, _ string, h v1.Hash) error {
	p, err := d.path(h)
	if err != nil {
		return err
	}
	err = os.Remove(p)
	if errors.Is(err, fs.ErrNotExist) {
		return ggcrregistry.ErrNotFound
	}
	return err
}
