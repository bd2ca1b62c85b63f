package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const reloadYAML = `rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
`

// policyOf returns the RateLimit-Policy of GET /api/search, or its status
// when it has none.
func policyOf(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/api/search")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if p := resp.Header.Get("RateLimit-Policy"); p != "" {
		return p
	}
	return resp.Status
}

// eventually polls policyOf until it is want, failing after 10s.
func eventually(t *testing.T, base, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := policyOf(t, base)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("RateLimit-Policy %q after 10s, want %q", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReloadOnSIGHUP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	if err := os.WriteFile(file, []byte(reloadYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServerProcess(t, 0, "-config", file, "-watch=false")
	if got := policyOf(t, p.base); got != `"search";q=2;w=60` {
		t.Fatalf("policy %q before any reload", got)
	}
	policyOf(t, p.base)
	if got := policyOf(t, p.base); got != `"search";q=2;w=60` { // the 429 carries it too
		t.Fatalf("third request: %q", got)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(reloadYAML, "2/minute", "5/minute", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Not watched: nothing changes until SIGHUP.
	time.Sleep(300 * time.Millisecond)
	if got := policyOf(t, p.base); got != `"search";q=2;w=60` {
		t.Fatalf("-watch=false: the file was reloaded without SIGHUP (policy %q)", got)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, p.base, `"search";q=5;w=60`)

	// A bad file keeps the running rules and says why.
	if err := os.WriteFile(file, []byte(strings.Replace(reloadYAML, "2/minute", "5/fortnight", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.stderr.String(), "reload failed") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload failure logged within 10s; stderr:\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	logged := p.stderr.String()
	if want := `level=ERROR msg="rlkit: rate-limit config reload failed; the running configuration stays" file=` + file +
		` error="rate-limit config ` + file + `:6: rule \"search\": field \"limit\": value \"5/fortnight\"`; !strings.Contains(logged, want) {
		t.Errorf("stderr:\n%s\nwant a line with:\n%s", logged, want)
	}
	if got := policyOf(t, p.base); got != `"search";q=5;w=60` {
		t.Errorf("after a bad file: policy %q, want the running one", got)
	}
}

func TestReloadOnChange(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	if err := os.WriteFile(file, []byte(reloadYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServerProcess(t, 0, "-config", file)
	if got := policyOf(t, p.base); got != `"search";q=2;w=60` {
		t.Fatalf("policy %q before any reload", got)
	}
	// Saved the way editors do: a new file renamed over the old.
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Replace(reloadYAML, "2/minute", "7/minute", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	eventually(t, p.base, `"search";q=7;w=60`)
	if !strings.Contains(p.stderr.String(), `new_terms=[search] afresh=[]`) {
		t.Errorf("the reload's log line does not name the rule under new terms; stderr:\n%s", p.stderr)
	}
}
