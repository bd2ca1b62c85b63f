package benchmarks

import "syscall"

// childProcAttr makes the kernel SIGKILL a child (examples/server) when the
// thread that started it exits, so a crashed or killed benchmark never
// leaves a server behind.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
