//go:build !unix

package demo

// openFileLimit is the process's limit on open files; 0: unknown here.
func openFileLimit() int { return 0 }
