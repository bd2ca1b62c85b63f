package fiberrl_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/fiberrl"
)

// A denied handler written as the README's "Your own denied response"
// describes (the rule, d.Rule.Name, is in the Decision; the status is 429
// or 503) is also given the 403 of a banned network, whose Decision has
// no Rule: the handler panics on every request from a banned network, and
// Fiber, which recovers nothing unless told to, dies with the whole
// process. Run in a child process.
func TestAttack14DeniedHandlerBannedCrashesFiber(t *testing.T) {
	if os.Getenv("ATTACK14_CHILD") == "1" {
		attack14FiberChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttack14DeniedHandlerBannedCrashesFiber$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ATTACK14_CHILD=1")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	if err != nil || strings.Contains(string(out), "panic:") {
		first := string(out)
		if i := strings.Index(first, "goroutine "); i > 0 {
			first = first[:i]
		}
		t.Errorf("a request from a banned network to a Fiber app whose denied handler reads d.Rule.Name killed the server: %v\n%s", err, first)
	}
}

func attack14FiberChild() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: api
      paths: ["/api"]
      limit: "100/minute"
  ban:
    networks: ["127.0.0.0/8"]
`), "attack.yaml")
	if err != nil {
		panic(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(fiberrl.New(cfg, fiberrl.WithDeniedHandler(func(c *fiber.Ctx, d *core.Decision) error {
		c.Set("Content-Type", "application/problem+json")
		return c.Status(d.Status()).SendString(fmt.Sprintf(`{"title": %q, "detail": "rule %s"}`, http.StatusText(d.Status()), d.Rule.Name))
	})))
	app.Get("/api", func(c *fiber.Ctx) error { return c.SendString("ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = app.Listener(ln) }()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + ln.Addr().String() + "/api")
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println("status", resp.StatusCode)
	}
	time.Sleep(200 * time.Millisecond)
	_ = app.Shutdown()
}
