package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"bex.co/bex/internal/loopfs"
	"bex.co/bex/internal/sandbox"
)

// defaultEmptyDirSize bounds an emptyDir volume without a sizeLimit: each
// is a tmpfs, whose pages count in the memory of the container that writes
// them.
const defaultEmptyDirSize = 64 << 20

// volumeStore keeps the Pods' emptyDir volumes: a tmpfs each, mounted on
// the host at dir/<pod UID>/<volume> for the Pod's life, so that the data
// outlives a restart of the container, as a kubelet keeps it, and goes
// with the Pod.
type volumeStore struct{ dir string }

// admitVolumes says what of the Pod's volumes and mounts bex-node does not
// run: any volume but an emptyDir, a device, a mount with a subPath or a
// propagation, or one at a path the container's runtime keeps.
func admitVolumes(s corev1.PodSpec) []string {
	var no []string
	empty := map[string]bool{}
	for _, v := range s.Volumes {
		if v.EmptyDir == nil {
			no = append(no, fmt.Sprintf("volume %q (only emptyDir volumes; set automountServiceAccountToken: false for the token's)", v.Name))
			continue
		}
		empty[v.Name] = true
	}
	for _, c := range s.Containers {
		if len(c.VolumeDevices) > 0 {
			no = append(no, fmt.Sprintf("volume devices in container %q", c.Name))
		}
		for _, m := range c.VolumeMounts {
			switch {
			case !empty[m.Name]:
				no = append(no, fmt.Sprintf("the mount of volume %q in container %q", m.Name, c.Name))
			case m.SubPath != "" || m.SubPathExpr != "":
				no = append(no, fmt.Sprintf("a subPath in the mount of volume %q", m.Name))
			case m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone:
				no = append(no, fmt.Sprintf("mount propagation of volume %q", m.Name))
			case !mountPathOK(m.MountPath):
				no = append(no, fmt.Sprintf("volume %q at %s (a path below / outside /proc, /dev, /sys, /usr, /etc, /app and /tmp itself)", m.Name, m.MountPath))
			}
		}
	}
	return no
}

func mountPathOK(p string) bool {
	p = filepath.Clean(p)
	if !filepath.IsAbs(p) || p == "/" || p == "/tmp" {
		return false
	}
	for _, reserved := range []string{"/proc", "/dev", "/sys", "/usr", "/etc", "/app"} {
		if p == reserved || strings.HasPrefix(p, reserved+"/") {
			return false
		}
	}
	return true
}

// mount mounts the Pod's emptyDir volumes that are not mounted yet and
// returns the binds of container c's mounts of them.
func (s *volumeStore) mount(pod *corev1.Pod, c corev1.Container) ([]sandbox.Bind, error) {
	dirs := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil {
			continue
		}
		size := int64(defaultEmptyDirSize)
		if l := v.EmptyDir.SizeLimit; l != nil && l.Sign() > 0 {
			size = l.Value()
		}
		dir := filepath.Join(s.dir, string(pod.UID), v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("making emptyDir %q: %w", v.Name, err)
		}
		done, err := loopfs.Mounted(dir)
		if err != nil {
			return nil, fmt.Errorf("emptyDir %q: %w", v.Name, err)
		}
		if !done {
			// Anyone in the container may write, as in a kubelet's
			// emptyDir: its users are the tenant's, unknown here.
			if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0777", size)); err != nil {
				return nil, fmt.Errorf("mounting emptyDir %q: %w", v.Name, err)
			}
		}
		dirs[v.Name] = dir
	}
	var binds []sandbox.Bind
	for _, m := range c.VolumeMounts {
		binds = append(binds, sandbox.Bind{Path: dirs[m.Name], Target: filepath.Clean(m.MountPath), ReadOnly: m.ReadOnly})
	}
	return binds, nil
}

// remove unmounts and removes the Pod's volumes.
func (s *volumeStore) remove(uid string) error {
	return s.removeDir(filepath.Join(s.dir, uid))
}

// sweep removes the volumes of every Pod but those of keep (their
// containers are adopted): at the agent's start, whose other Pods run
// anew.
func (s *volumeStore) sweep(keep map[string]bool) error {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !keep[e.Name()] {
			errs = append(errs, s.removeDir(filepath.Join(s.dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

func (s *volumeStore) removeDir(pod string) error {
	entries, err := os.ReadDir(pod)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		dir := filepath.Join(pod, e.Name())
		m, err := loopfs.Mounted(dir)
		if err != nil {
			return err
		}
		if m {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				return fmt.Errorf("unmounting %s: %w", dir, err)
			}
		}
	}
	return os.RemoveAll(pod)
}
