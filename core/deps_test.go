package core_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreDependencies keeps core free of frameworks, Redis, metrics and
// file notification: it may import the standard library, its own
// subpackages and the YAML package.
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

// TestMetricsNotImported keeps the metrics libraries out of every program
// that does not ask for them: core (with its stores) and the adapters
// compile neither Prometheus nor OpenTelemetry; only metrics/prom and
// metrics/otel do.
func TestMetricsNotImported(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		"./...", "../nethttp", "../ginrl", "../echorl", "../fiberrl").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 10 {
		t.Fatalf("go list listed %d packages (%q): not the dependencies of core and the adapters", len(pkgs), pkgs)
	}
	for _, pkg := range pkgs {
		for _, banned := range []string{"github.com/prometheus/", "go.opentelemetry.io/", "github.com/rlkit/rlkit/metrics/"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("core or an adapter depends on %s; metrics packages must be imported only by the programs that use them", pkg)
			}
		}
	}
}
