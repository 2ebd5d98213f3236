//go:build unix && !linux

package pgserver

import "syscall"

// sysProcAttr runs the child as cred (nil: as the caller). Only Linux can tie
// the child's life to its parent, so deathSig is ignored here.
func sysProcAttr(cred *syscall.Credential, _ syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
