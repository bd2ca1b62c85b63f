//go:build linux

package redisserver

import "syscall"

// sysProcAttr makes the kernel SIGKILL redis-server when the thread that
// started it exits, so a crashed benchmark or report never leaves one behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
