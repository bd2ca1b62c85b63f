package jwtissuer_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps Redis out of programs that import jwtissuer
// without jwtissuer/redislimiter: jwtissuer may import the standard
// library, rlkit/core and the packages below it that core imports,
// golang-jwt, and what core imports (YAML); never core/redisstore or
// go-redis.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case pkg == "github.com/rlkit/rlkit/jwtissuer", pkg == "github.com/rlkit/rlkit/core",
			strings.HasPrefix(pkg, "github.com/rlkit/rlkit/core/") && !strings.HasPrefix(pkg, "github.com/rlkit/rlkit/core/redisstore"),
			pkg == "github.com/golang-jwt/jwt/v5", pkg == "go.yaml.in/yaml/v3":
		default:
			t.Errorf("jwtissuer depends on %s", pkg)
		}
	}
}
