package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rlkit/rlkit/core"
)

// printBanner prints where the server listens, what it limits, where it
// counts (store), tokens for a demo user and a super-admin, and curl commands
// to try, in one Write.
func printBanner(out io.Writer, addr, source, store string, cfg *core.Config, secret, metricsURL string) error {
	now := time.Now()
	user, err := sign(secret, claims{RegisteredClaims: registered("demo-user", now)})
	if err != nil {
		return err
	}
	admin, err := sign(secret, claims{Role: superAdmin, RegisteredClaims: registered("admin", now)})
	if err != nil {
		return err
	}
	base := "http://" + clientAddr(addr)
	w := new(bytes.Buffer)

	fmt.Fprintf(w, "rlkit demo server\nlistening on http://%s\nconfig:   %s\n", addr, source)
	if cfg.Enabled() {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, r := range append(cfg.Rules(), cfg.Default()) {
			paths := strings.Join(r.Paths(), ", ")
			if r == cfg.Default() {
				paths = "any other path"
			}
			fmt.Fprintf(tw, "  \t%s\t%s\t%s\n", r.Name, limits(r), paths)
		}
		tw.Flush()
	} else {
		fmt.Fprintln(w, "          rate limiting is OFF (enabled: false): every request passes")
	}
	fmt.Fprintf(w, "store:    %s\n", store)
	if metricsURL != "" {
		fmt.Fprintf(w, "metrics:  %s (Prometheus text)\n", metricsURL)
	}
	fmt.Fprintf(w, `identity: "Authorization: Bearer <HS256 JWT>" counts as user:<sub>; role %q is never limited;
          no token counts by client IP; an invalid token gets 401

Tokens (HS256, valid for %dh) — paste these two lines into your shell:
TOKEN=%s
ADMIN_TOKEN=%s

Try it:
  # search is 10/second per user: after 10 requests within one second, 429
  for i in $(seq 1 15); do curl -s -o /dev/null -w "%%{http_code}\n" -H "Authorization: Bearer $TOKEN" %[5]s/api/search; done
  # the RateLimit-Policy and RateLimit headers (and Retry-After on a 429)
  curl -i -H "Authorization: Bearer $TOKEN" %[5]s/api/search
  # reindex is 2/minute per user: 200, 200, then 429 until the minute is over
  for i in 1 2 3; do curl -s -o /dev/null -w "%%{http_code}\n" -H "Authorization: Bearer $TOKEN" %[5]s/api/kb/kb-01/reindex; done
  # a super-admin is never limited, and gets no RateLimit headers: always 200
  for i in $(seq 1 5); do curl -s -o /dev/null -w "%%{http_code}\n" -H "Authorization: Bearer $ADMIN_TOKEN" %[5]s/api/kb/kb-01/reindex; done
  # exempt paths are never counted
  curl -i %[5]s/health

Ctrl-C stops the server.
`, superAdmin, int(tokenTTL.Hours()), user, admin, base)
	_, err = out.Write(w.Bytes())
	return err
}

func registered(sub string, now time.Time) jwt.RegisteredClaims {
	return jwt.RegisteredClaims{
		Subject:   sub,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(tokenTTL)),
	}
}

func sign(secret string, c claims) (string, error) {
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
}

// limits formats a rule's limits: "10/second", or "10/second + 500/hour".
func limits(r *core.Rule) string {
	s := make([]string, len(r.Policy.Limits))
	for i, l := range r.Policy.Limits {
		s[i] = l.String()
	}
	return strings.Join(s, " + ")
}

// clientAddr is addr as a client dials it: a wildcard host becomes loopback.
func clientAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("localhost", port)
	}
	return addr
}
