//go:build !linux

package benchmarks

import (
	"syscall"
	"time"
)

// childProcAttr returns nil: only Linux can tie a child's life to its
// parent. Elsewhere BenchmarkLoad's cleanup is the only guard.
func childProcAttr() *syscall.SysProcAttr { return nil }

// processCPU returns false: only Linux's /proc is read.
func processCPU(int) (time.Duration, bool) { return 0, false }

// selfCPU returns false: measured on Linux only.
func selfCPU() (time.Duration, bool) { return 0, false }

// machineCPU returns false: only Linux's /proc is read.
func machineCPU() (time.Duration, bool) { return 0, false }
