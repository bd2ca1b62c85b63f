package core_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreDependencies keeps core free of frameworks and Redis: it may
// import the standard library, its own subpackages and the YAML package.
func TestCoreDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".", "./algo", "./memstore", "./storetest").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if !strings.HasPrefix(pkg, "github.com/rlkit/rlkit/core") && pkg != "go.yaml.in/yaml/v3" {
			t.Errorf("core depends on %s; want only the standard library, rlkit/core/... and go.yaml.in/yaml/v3", pkg)
		}
	}
}
