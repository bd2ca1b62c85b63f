package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var metricsRE = regexp.MustCompile(`(?m)^metrics:  (http://\S+/metrics) \(Prometheus text\)$`)

// TestMetricsFlag runs the server with -metrics and scrapes it after a few
// requests: exact counts by rule and outcome, the store's keys, a reload.
func TestMetricsFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	if err := os.WriteFile(file, []byte(reloadYAML+`    - name: export
      paths: ["/api/export"]
      limit: "1/minute"
      mode: shadow
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServerProcess(t, 0, "-metrics", "127.0.0.1:0", "-config", file)
	m := metricsRE.FindStringSubmatch(p.stdout.String())
	for deadline := time.Now().Add(10 * time.Second); m == nil; m = metricsRE.FindStringSubmatch(p.stdout.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no metrics line in the banner:\n%s", p.stdout)
		}
		time.Sleep(10 * time.Millisecond) // the banner's lines are read one by one
	}
	base, metricsURL := p.base, m[1]
	for _, path := range []string{"/api/search", "/api/search", "/api/search", "/health", "/other", "/api/export", "/api/export"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("scrape: %s, Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`rlkit_decisions_total{outcome="allowed",rule="search"} 2`,
		`rlkit_decisions_total{outcome="denied",rule="search"} 1`,
		`rlkit_decisions_total{outcome="allowed",rule="default"} 3`,
		`rlkit_decisions_total{outcome="allowed",rule="export"} 1`,
		`rlkit_decisions_total{outcome="shadow_denied",rule="export"} 1`,
		`rlkit_store_evictions_total{store="memory"} 0`,
		`rlkit_decisions_total{outcome="exempt",rule=""} 1`,
		`rlkit_store_keys{store="memory"} 3`,
		`rlkit_config_reloads_total{result="failure"} 0`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("scrape lacks %q; got:\n%s", want, body)
		}
	}
}
