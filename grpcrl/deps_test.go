package grpcrl_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestGRPCOnlyHere keeps gRPC out of every program that does not ask for
// it: no package of the module but grpcrl, and those that import it (its
// examples), compiles google.golang.org/grpc.
func TestGRPCOnlyHere(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "github.com/rlkit/rlkit/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list listed %d packages: not the module's", len(lines))
	}
	const self = "github.com/rlkit/rlkit/grpcrl"
	for _, line := range lines {
		pkg, deps, _ := strings.Cut(line, " ")
		all := strings.Fields(deps)
		if pkg == self || slices.Contains(all, self) {
			continue
		}
		for _, d := range all {
			if strings.HasPrefix(d, "google.golang.org/grpc") {
				t.Errorf("%s depends on %s: only grpcrl (and what imports it) may", pkg, d)
				break
			}
		}
	}
}
