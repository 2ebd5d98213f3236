// Package sandbox runs tenant processes in OCI containers with Debian's
// runc, so that tenant code sees its own files and nothing of the platform.
//
// A Manager owns one slot of the machine: a bridge ("bex-N") with a /24 of
// the sandbox subnet, an nftables table that keeps the bridge's containers
// away from the host and from each other, a runc state root and the
// instances' scratch mounts under its run directory, and a range of host
// uids. Slots are claimed with a lock file, so several platforms (or test
// processes) on one machine never share a bridge, an address or a uid; a
// slot left behind by a process that died is cleaned when it is claimed
// again.
//
// Each Container has its own mount, PID, IPC, UTS, network and user
// namespaces. Its user namespace maps it to a host uid range of its tenant
// (no two tenants share one); its network namespace has one veth port on
// the bridge, isolated from the other ports, and nothing else: the host's
// loopback services are not in it, and the nftables table drops every new
// connection from the bridge to the host. Its root is read-only: either
// the platform's run base (the host's /usr and a generated /etc, with the
// release's files at /app on a bounded writable overlay) or the whole root
// filesystem of an image that brings its own. A container of the run base
// has a root directory of its own (its mount points only), so the paths of
// one container's binds are not seen by another. /tmp is a bounded tmpfs.
// cgroup limits bound memory, CPU and pids; no capabilities, no_new_privs
// and a seccomp filter bound what its processes may ask of the kernel.
//
// A Container's process runs either as the caller's child (Command: the
// process runtime's instances, builds) or under a shim of its own that
// outlives the caller (Start: bex-node's Pods). A Manager of an Owner
// keeps its slot for the next Manager of that Owner: Release leaves the
// containers running, and the next Manager finds them (Kept) and their
// processes (Resume).
//
// The process runtime (internal/runtime/process) starts its instances
// through a Manager and hands the edge the containers' addresses.
package sandbox
