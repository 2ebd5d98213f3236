package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/go-logr/logr"

	"bex.co/bex/internal/loopfs"
	"bex.co/bex/internal/steptime"
)

// DefaultDiskSize bounds a build's work directory, and each tenant's build
// caches, unless Options say otherwise.
const DefaultDiskSize = 4 << 30

// stepDisks is the push's step (internal/steptime) that makes, mounts and
// unmounts a build's disks.
const stepDisks = "disks"

// diskImageSuffix names the image of a build's work directory, beside it.
const diskImageSuffix = ".ext4"

// disks gives each build's work directory and each tenant's caches a file
// system of their own (internal/loopfs), so that a build that writes
// without end stops at their size.
//
// Which build uses what is kept in locks on the images' files (flock), not
// in memory, so that Builders of one process or of several that share a
// WorkRoot and CacheDir, and one that died, agree: a build holds its work
// directory's image exclusively; every build of a tenant holds a shared
// lock on the tenant's cache image while it runs, and the last to leave
// unmounts it. CacheDir/disks/<tenant>.lock orders mounting and
// unmounting.
type disks struct {
	builds    string // WorkRoot/builds
	cacheDir  string
	workSize  int64
	cacheSize int64
	log       logr.Logger
}

// work mounts a new file system of workSize at dir, the build's work
// directory, made empty just before. release unmounts it and removes its
// image; when work fails, it has done so itself. Both are the push's disks
// step.
func (d *disks) work(ctx context.Context, dir string) (release func(), err error) {
	defer steptime.Start(ctx, stepDisks)()
	image := dir + diskImageSuffix
	lock, err := os.OpenFile(image, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		os.Remove(image)
		return nil, err
	}
	// Not the named result: a failure returns nil, and undoes what was
	// done with this.
	undo := func() {
		if err := loopfs.Unmount(dir); err != nil {
			d.log.Error(err, "Unmounting a build's work directory", "dir", dir)
		}
		if err := os.Remove(image); err != nil {
			d.log.Error(err, "Removing a build's disk image", "image", image)
		}
		lock.Close()
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	template, err := d.emptyImage(ctx)
	if err != nil {
		return nil, err
	}
	if err := loopfs.Copy(template, image); err != nil {
		return nil, err
	}
	// Removed once unmounted: nothing in it needs to reach the disk.
	if err := loopfs.MountScratch(image, dir); err != nil {
		return nil, err
	}
	// The mount's root is the build's own directory, as MkdirTemp made it.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	_ = os.Remove(filepath.Join(dir, "lost+found"))
	return timedRelease(ctx, undo), nil
}

// templateSuffix names the image of an empty work file system that each
// build's work disk is copied from (not a build's: sweep leaves it).
const templateSuffix = ".ext4-empty"

// emptyImage returns the image of an empty file system of workSize in
// the builds' directory, made the first time (mkfs.ext4 under a
// temporary name, then renamed, so that builds that race each make one
// and none sees half of one). A build's work disk is a copy of it
// (loopfs.Copy), cheaper than a mkfs.ext4 of its own.
func (d *disks) emptyImage(ctx context.Context) (string, error) {
	path := filepath.Join(d.builds, fmt.Sprintf("work-%d%s", d.workSize, templateSuffix))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	f, err := os.CreateTemp(d.builds, "work-*"+templateSuffix+".tmp")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	f.Close()
	if err := loopfs.Make(ctx, tmp, d.workSize); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, nil
}

// timedRelease is release, timed as the push's disks step (unmounting
// is part of what the disks cost).
func timedRelease(ctx context.Context, release func()) func() {
	return func() {
		defer steptime.Start(ctx, stepDisks)()
		release()
	}
}

// cache mounts the tenant's cache image at dir, unless a build of the
// tenant already has, making the image first if it is missing or of
// another size. A cache found nearly full (a build before wrote it full)
// is emptied: the tenant's next build starts afresh rather than fail.
// release unmounts it when no other build of the tenant uses it. Both
// are the push's disks step.
func (d *disks) cache(ctx context.Context, tenant, dir string) (release func(), emptied bool, err error) {
	defer steptime.Start(ctx, stepDisks)()
	images := filepath.Join(d.cacheDir, "disks")
	if err := os.MkdirAll(images, 0o700); err != nil {
		return nil, false, err
	}
	image := filepath.Join(images, tenant+diskImageSuffix)
	mu, err := lockFile(filepath.Join(images, tenant+".lock"))
	if err != nil {
		return nil, false, err
	}
	defer mu.Close()
	mounted, err := loopfs.Mounted(dir)
	if err != nil {
		return nil, false, err
	}
	if !mounted {
		if st, err := os.Stat(image); err != nil || st.Size() != d.cacheSize {
			if err := loopfs.Make(ctx, image, d.cacheSize); err != nil {
				return nil, false, err
			}
		}
		// What lies under the mount point (caches from before they
		// were bounded) would take room that nothing sees.
		if err := emptyDir(dir); err != nil {
			return nil, false, err
		}
		if err := loopfs.Mount(image, dir); err != nil {
			return nil, false, err
		}
		_ = os.Remove(filepath.Join(dir, "lost+found"))
		if u, err := loopfs.UsageOf(dir); err == nil && u.Used() > 0.9 {
			if err := emptyDir(dir); err != nil {
				_ = loopfs.Unmount(dir)
				return nil, false, fmt.Errorf("emptying the full build caches: %w", err)
			}
			emptied = true
		}
	}
	use, err := os.Open(image)
	if err == nil {
		err = syscall.Flock(int(use.Fd()), syscall.LOCK_SH)
	}
	if err != nil {
		if use != nil {
			use.Close()
		}
		return nil, false, err
	}
	return timedRelease(ctx, func() {
		mu, err := lockFile(filepath.Join(images, tenant+".lock"))
		if err != nil {
			d.log.Error(err, "Locking a tenant's build caches", "tenant", tenant)
			use.Close()
			return
		}
		defer mu.Close()
		// Exclusive only when no other build holds it: the last one out
		// unmounts.
		if syscall.Flock(int(use.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			if err := loopfs.Unmount(dir); err != nil {
				d.log.Error(err, "Unmounting a tenant's build caches", "tenant", tenant)
			}
		}
		use.Close()
	}), emptied, nil
}

// sweep unmounts and removes what builds that are gone left: work
// directories of builds whose process died, caches no build uses. New
// calls it, and Close.
func (d *disks) sweep() error {
	var errs []error
	images, _ := filepath.Glob(filepath.Join(d.builds, "*"+diskImageSuffix))
	for _, image := range images {
		f, err := os.Open(image)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			dir := strings.TrimSuffix(image, diskImageSuffix)
			if err := loopfs.Unmount(dir); err != nil {
				errs = append(errs, err)
			} else {
				if err := removeAll(dir); err != nil {
					errs = append(errs, err)
				}
				_ = os.Remove(image)
			}
		}
		f.Close()
	}
	caches, _ := filepath.Glob(filepath.Join(d.cacheDir, "disks", "*"+diskImageSuffix))
	for _, image := range caches {
		tenant := strings.TrimSuffix(filepath.Base(image), diskImageSuffix)
		if err := d.sweepCache(tenant, image); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (d *disks) sweepCache(tenant, image string) error {
	mu, err := lockFile(filepath.Join(d.cacheDir, "disks", tenant+".lock"))
	if err != nil {
		return err
	}
	defer mu.Close()
	f, err := os.Open(image)
	if err != nil {
		return nil
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return nil
	}
	return loopfs.Unmount(filepath.Join(d.cacheDir, "tenants", tenant))
}

// lockFile opens path, made if missing, locked exclusively.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// emptyDir removes what dir holds, keeping dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := removeAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// DiskFullError is the error of a build that ran out of the room of its
// work directory or of its tenant's caches.
type DiskFullError struct {
	// What ran full, as the error names it.
	What string
	// Limit is its size in bytes.
	Limit int64
	Err   error
}

func (e *DiskFullError) Error() string {
	return fmt.Sprintf("the build wrote more than %s to %s, its limit: %v", sizeString(e.Limit), e.What, e.Err)
}

func (e *DiskFullError) Unwrap() error { return e.Err }

// diskErr says that err came of a full disk, when the build's work
// directory or the tenant's caches are full.
func (w *workspace) diskErr(err error) error {
	var te *TimeoutError
	if w.disks == nil || errors.As(err, &te) {
		return err
	}
	if u, e := loopfs.UsageOf(w.root); e == nil && u.Full() {
		return &DiskFullError{What: "its work directory (the checkout, HOME and TMPDIR)", Limit: w.disks.workSize, Err: err}
	}
	if u, e := loopfs.UsageOf(w.cache); e == nil && u.Full() {
		return &DiskFullError{What: "the tenant's build caches (emptied before its next build)", Limit: w.disks.cacheSize, Err: err}
	}
	return err
}

// sizeString writes n bytes in GiB or MiB when it is a whole number of
// them.
func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
