package benchmarks

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childProcAttr makes the kernel SIGKILL a child (examples/server) when the
// thread that started it exits, so a crashed or killed benchmark never
// leaves a server behind.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processCPU returns the CPU time (user and system) that process pid has
// used so far, from /proc/<pid>/stat (in clock ticks of 1/100 s, which
// Linux fixes for that file), and false when it cannot be read.
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// utime and stime are the 12th and 13th fields after it.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * (time.Second / 100), true
}

// selfCPU returns the CPU time (user and system) this process has used so
// far, and false when it cannot be read.
func selfCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// machineCPU returns the CPU time all of the machine's CPUs have spent
// busy so far (anything but idle and waiting for I/O, steal included: time
// this machine's processes could not have), from the first line of
// /proc/stat (in ticks of 1/100 s), and false when it cannot be read.
func machineCPU() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal [guest guest_nice]:
	// guest time is counted in user time already.
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var busy int64
	for i, v := range f[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * (time.Second / 100), true
}

// TestProcessCPU reads this process's CPU time from /proc/<pid>/stat
// after burning some, and finds what getrusage says, to the file's tick.
func TestProcessCPU(t *testing.T) {
	start, ok := selfCPU()
	if !ok {
		t.Fatal("selfCPU: getrusage failed")
	}
	x := uint64(1)
	for {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if now, _ := selfCPU(); now-start >= 300*time.Millisecond {
			break
		}
	}
	before, _ := selfCPU()
	got, ok := processCPU(os.Getpid())
	after, _ := selfCPU()
	if !ok {
		t.Fatal("processCPU: /proc/self/stat not read")
	}
	// /proc counts whole ticks of 10 ms; rounding may cost one of them
	// for user and one for system time.
	if got < before-20*time.Millisecond || got > after+10*time.Millisecond {
		t.Errorf("processCPU = %v, getrusage %v to %v (x %d)", got, before, after, x)
	}
	if _, ok := processCPU(-1); ok {
		t.Error("processCPU(-1) = ok")
	}
}

// TestMachineCPU burns CPU on one goroutine and finds the machine's busy
// time grown by at least that much, to its tick, and by no more than
// every CPU busy the whole time.
func TestMachineCPU(t *testing.T) {
	m0, ok := machineCPU()
	if !ok {
		t.Fatal("machineCPU: /proc/stat not read")
	}
	s0, _ := selfCPU()
	w0 := time.Now()
	x := uint64(1)
	for {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if now, _ := selfCPU(); now-s0 >= 300*time.Millisecond {
			break
		}
	}
	s1, _ := selfCPU()
	m1, _ := machineCPU()
	wall := time.Since(w0)
	// Each CPU's counters tick apart: one tick per CPU of slack.
	slack := time.Duration(runtime.NumCPU()) * 10 * time.Millisecond
	if got := m1 - m0; got < s1-s0-slack || got > time.Duration(runtime.NumCPU())*wall+slack {
		t.Errorf("machine busy %v over %v, this process %v (x %d)", got, wall, s1-s0, x)
	}
}
