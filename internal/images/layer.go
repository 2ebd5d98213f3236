package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or directory of a layer.
type entry struct {
	// name is the path without a leading slash; a directory's ends in "/".
	name     string
	mode     int64
	uid, gid int
	// data, or the contents of file, is a regular file's content.
	data []byte
	file string
}

// layer writes entries as a gzipped tar at dst, every modification time
// mtime (zero: 1970), and returns it as a layer of media type mt.
func layer(dst string, mt types.MediaType, mtime time.Time, entries []entry) (v1.Layer, error) {
	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	if err := writeTarGz(dst, mtime, entries); err != nil {
		return nil, fmt.Errorf("writing layer: %w", err)
	}
	l, err := tarball.LayerFromFile(dst, tarball.WithMediaType(mt))
	if err != nil {
		return nil, fmt.Errorf("reading layer: %w", err)
	}
	return l, nil
}

func writeTarGz(dst string, mtime time.Time, entries []entry) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: mtime, Format: tar.FormatPAX, Typeflag: tar.TypeReg,
		}
		var body io.Reader
		switch {
		case e.name[len(e.name)-1] == '/':
			hdr.Typeflag = tar.TypeDir
		case e.file != "":
			src, err := os.Open(e.file)
			if err != nil {
				return err
			}
			defer src.Close()
			fi, err := src.Stat()
			if err != nil {
				return err
			}
			hdr.Size, body = fi.Size(), src
		default:
			hdr.Size, body = int64(len(e.data)), bytes.NewReader(e.data)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Close()
}
