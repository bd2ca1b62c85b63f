// Package demo holds what rlkit's example services share: the DESIGN
// example configuration, its routes, and the banner with curl lines that
// reach a limit.
package demo

import (
	_ "embed"
	"fmt"
	"io"

	"github.com/rlkit/rlkit/core"
)

// ConfigYAML is the DESIGN example configuration (ratelimit.yaml).
//
//go:embed ratelimit.yaml
var ConfigYAML []byte

// LoadConfig reads file, or the bundled ConfigYAML when file is "".
func LoadConfig(file string) (*core.Config, error) {
	if file == "" {
		return core.ParseConfig(ConfigYAML, "ratelimit.yaml (bundled)")
	}
	return core.LoadConfig(file)
}

// Route is one endpoint of the example services, in the routers' common
// template form (":id" parameters).
type Route struct{ Method, Path string }

// Routes are the endpoints the configuration's rules name, and /health,
// which it exempts.
var Routes = []Route{
	{"GET", "/api/search"},
	{"POST", "/api/kb/:kb/docs/upload"},
	{"POST", "/api/kb/:kb/docs/upload/batch"},
	{"POST", "/api/kb/:kb/reindex"},
	{"POST", "/api/kb/:kb/docs/:doc/reindex"},
	{"POST", "/mcp"},
	{"GET", "/api/items"}, // no rule: the default limit
	{"GET", "/health"},
}

// OK is the body every example endpoint answers with.
var OK = []byte(`{"ok": true}` + "\n")

// KeyHeader names the header the examples count callers by: a stand-in for
// your authentication (an API key, a user id from a verified token).
const KeyHeader = "X-API-Key"

// PrintBanner writes where the service listens and curl lines that show a
// limit being hit.
func PrintBanner(w io.Writer, framework, addr string) {
	base := "http://" + addr
	fmt.Fprintf(w, `rlkit %s example listening on %s (in-memory store)
callers are counted by their %s header, or their IP without one.

  # search allows 10/second: the 11th answers 429 with Retry-After
  for i in $(seq 11); do curl -s -o /dev/null -w '%%{http_code} ' -H '%s: alice' %s/api/search; done; echo

  # reindex allows 2/minute per caller; another caller has their own count
  for i in 1 2 3; do curl -s -w '\n' -X POST -H '%s: alice' %s/api/kb/kb1/reindex; done
  curl -s -i -X POST -H '%s: bob' %s/api/kb/kb1/reindex

  # a batch upload weighs 10 of upload's 30/minute: the 4th is refused
  for i in 1 2 3 4; do curl -s -o /dev/null -w '%%{http_code} ' -X POST -H '%s: alice' %s/api/kb/kb1/docs/upload/batch; done; echo

  # /health is exempt: never counted, no rate-limit headers
  curl -s -i %s/health
`, framework, addr, KeyHeader, KeyHeader, base, KeyHeader, base, KeyHeader, base, KeyHeader, base, base)
}
