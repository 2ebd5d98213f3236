// Package loopfs gives a directory a file system of bounded size: an ext4
// image in a sparse file, attached to a loop device and mounted there, so
// that whatever writes below the directory runs out of space at the
// image's size and the disk that holds the image never fills past it.
//
// Make writes the image (mkfs.ext4, no journal, nothing reserved for
// root), Copy copies an image Make wrote, holes kept, which is cheaper
// than making one; Mount attaches it to a free loop device, made through
// /dev/loop-control when its node is missing, that detaches itself once
// the file system is unmounted, and mounts it nosuid and nodev
// (MountScratch also without disk flushes, for an image removed after
// use); Unmount undoes both. Usage reads how full a mounted image is, to tell a writer
// that ran out of space why.
//
// The builder (builder/build) bounds each build's work directory and each
// tenant's build caches with it. Everything here needs root.
package loopfs
