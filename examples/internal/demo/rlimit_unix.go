//go:build unix

package demo

import "syscall"

// openFileLimit is the process's soft limit on open files; 0 when unknown.
func openFileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return int(min(r.Cur, 1<<30)) // "unlimited" is the largest value

}
