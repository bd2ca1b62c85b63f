//go:build !linux

package benchmarks

import "syscall"

// childProcAttr returns nil: only Linux can tie a child's life to its
// parent. Elsewhere BenchmarkLoad's cleanup is the only guard.
func childProcAttr() *syscall.SysProcAttr { return nil }
