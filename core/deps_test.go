package core_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreDependencies keeps core free of frameworks, Redis and metrics:
// it may import the standard library, its own subpackages, the YAML
// package and fsnotify (for WatchConfig, with the golang.org/x/sys it
// needs).
func TestCoreDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".", "./algo", "./memstore", "./storetest").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if !strings.HasPrefix(pkg, "github.com/rlkit/rlkit/core") && pkg != "go.yaml.in/yaml/v3" &&
			!strings.HasPrefix(pkg, "github.com/fsnotify/fsnotify") && !strings.HasPrefix(pkg, "golang.org/x/sys/") {
			t.Errorf("core depends on %s; want only the standard library, rlkit/core/..., go.yaml.in/yaml/v3 and fsnotify", pkg)
		}
	}
}
