package pgserver

import "syscall"

// sysProcAttr runs the child as cred (nil: as the caller) and delivers
// deathSig to it when the thread that started it dies.
func sysProcAttr(cred *syscall.Credential, deathSig syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: deathSig}
}
