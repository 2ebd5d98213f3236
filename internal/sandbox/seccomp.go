package sandbox

import (
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// deniedSyscalls are what a web app has no use for and what widens the
// kernel's surface: kernel modules and keyrings, mounts and namespaces,
// tracing other processes, BPF and perf, io_uring, clocks, reboot and swap.
// They fail with EPERM.
var deniedSyscalls = []string{
	"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module", "delete_module",
	"finit_module", "fsconfig", "fsmount", "fsopen", "fspick", "get_kernel_syms", "init_module",
	"io_uring_enter", "io_uring_register", "io_uring_setup", "ioperm", "iopl", "kcmp",
	"kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mount", "mount_setattr",
	"move_mount", "name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree",
	"perf_event_open", "pivot_root", "process_vm_readv", "process_vm_writev", "ptrace",
	"query_module", "quotactl", "quotactl_fd", "reboot", "request_key", "setns", "settimeofday",
	"stime", "swapoff", "swapon", "syslog", "sysfs", "umount", "umount2", "unshare", "uselib",
	"userfaultfd", "ustat", "vm86", "vm86old",
}

// namespaceFlags are clone's flags that make new namespaces.
var namespaceFlags = []uint64{
	syscall.CLONE_NEWNS, syscall.CLONE_NEWUTS, syscall.CLONE_NEWIPC, syscall.CLONE_NEWUSER,
	syscall.CLONE_NEWPID, syscall.CLONE_NEWNET, syscall.CLONE_NEWCGROUP, 0x80, // CLONE_NEWTIME
}

// seccompProfile allows every system call but the denied ones, clone with
// a namespace flag, and clone3 (whose flags a filter cannot read; it
// answers ENOSYS, so the C library falls back to clone).
func seccompProfile() *specs.LinuxSeccomp {
	eperm := uint(syscall.EPERM)
	enosys := uint(syscall.ENOSYS)
	s := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32, specs.ArchAARCH64, specs.ArchARM},
		Syscalls: []specs.LinuxSyscall{
			{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		},
	}
	for _, flag := range namespaceFlags {
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{
			Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: flag, ValueTwo: flag, Op: specs.OpMaskedEqual}},
		})
	}
	return s
}
