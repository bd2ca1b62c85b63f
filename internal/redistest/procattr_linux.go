//go:build linux

package redistest

import "syscall"

// sysProcAttr makes the kernel SIGKILL the child when the test binary dies,
// so a crashed or killed test never leaves a redis-server behind.
//
// Pdeathsig fires when the thread that started the child exits, not the
// process; the Go runtime keeps its threads unless a goroutine exits while
// locked to one, which these helpers never do.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
