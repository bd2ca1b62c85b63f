package worksclient_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps Redis out of programs that use worksclient
// without worksclient/worksredis: worksclient and what it imports never
// include go-redis.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) == 0 || pkgs[len(pkgs)-1] != "github.com/rlkit/rlkit/worksclient" {
		t.Fatalf("go list -deps listed %q: not the dependencies of worksclient", pkgs)
	}
	for _, pkg := range pkgs {
		if strings.HasPrefix(pkg, "github.com/redis/go-redis") || pkg == "github.com/rlkit/rlkit/worksclient/worksredis" ||
			pkg == "github.com/rlkit/rlkit/core/redisstore" || pkg == "github.com/rlkit/rlkit/internal/redisbound" {
			t.Errorf("worksclient depends on %s", pkg)
		}
	}
}
