package store_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStoreContractDependencies keeps the store contract apart from the
// engine: package store, the conformance suite and the two stores compile
// neither core's configuration (rlkit/core and the YAML parser) nor
// net/http, so a store implementer's program holds only what a store needs.
func TestStoreContractDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".", "../storetest", "../memstore", "../redisstore").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 20 {
		t.Fatalf("go list listed %d packages (%q): not the dependencies of the stores", len(pkgs), pkgs)
	}
	for _, pkg := range pkgs {
		switch pkg {
		case "github.com/rlkit/rlkit/core", "go.yaml.in/yaml/v3", "net/http":
			t.Errorf("the store contract or a store depends on %s", pkg)
		}
	}
}
