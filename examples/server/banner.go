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

// banner is what the server prints when it starts: where it listens
// (addr), the configuration and where it came from (source), where it
// counts (store), the secret it signs demo tokens with, and where its
// metrics are ("" when off).
type banner struct {
	addr, source, store string
	cfg                 *core.Config
	secret, metricsURL  string
}

// print prints where the server listens, what it limits, where it counts,
// tokens for a demo user and a super-admin, and curl commands to try, in
// one Write.
func (bn banner) print(out io.Writer) error {
	now := time.Now()
	user, err := sign(bn.secret, claims{RegisteredClaims: registered("demo-user", now)})
	if err != nil {
		return err
	}
	admin, err := sign(bn.secret, claims{Role: superAdmin, RegisteredClaims: registered("admin", now)})
	if err != nil {
		return err
	}
	pro, err := sign(bn.secret, claims{Plan: "pro", RegisteredClaims: registered("pro-user", now)})
	if err != nil {
		return err
	}
	base := "http://" + clientAddr(bn.addr)
	w := new(bytes.Buffer)

	fmt.Fprintf(w, "rlkit demo server\nlistening on http://%s\nconfig:   %s\n", bn.addr, bn.source)
	if bn.cfg.Enabled() {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, r := range append(bn.cfg.Rules(), bn.cfg.Default()) {
			paths := strings.Join(r.Paths(), ", ")
			if r == bn.cfg.Default() {
				paths = "any other path"
			}
			if c := r.Count(); c != "all" {
				paths += " (counts " + c + " only)"
			}
			if d := r.Wait(); d != 0 {
				paths += " (holds a request up to " + d.String() + " for room)"
			}
			fmt.Fprintf(tw, "  \t%s\t%s\t%s\n", r.Name, limits(r), paths)
		}
		tw.Flush()
		for _, plan := range bn.cfg.Plans() {
			var own []string // the limits the plan changes
			for _, r := range append(bn.cfg.Rules(), bn.cfg.Default()) {
				if v := bn.cfg.PlanRule(plan, r.Name); v != nil && limits(v) != limits(r) {
					own = append(own, r.Name+" "+limits(v))
				}
			}
			fmt.Fprintf(w, "plan %s:  %s (a token with \"plan\": %q)\n", plan, strings.Join(own, ", "), plan)
		}
	} else {
		fmt.Fprintln(w, "          rate limiting is OFF (enabled: false): every request passes")
	}
	fmt.Fprintf(w, "store:    %s\n", bn.store)
	if bn.metricsURL != "" {
		fmt.Fprintf(w, "metrics:  %s (Prometheus text)\n", bn.metricsURL)
	}
	fmt.Fprintf(w, `identity: "Authorization: Bearer <HS256 JWT>" counts as user:<sub>; role %q is never limited;
          the token's "plan" claim picks the plan's limits (tiers); no token counts by client IP;
          an invalid token gets 401; a refused request gets an application/problem+json body

Tokens (HS256, valid for %dh) — paste these three lines into your shell:
TOKEN=%s
PRO_TOKEN=%s
ADMIN_TOKEN=%s

Try it:
  # search is 10/second per user: after 10 requests within one second, 429
  for i in $(seq 1 15); do curl -s -o /dev/null -w "%%{http_code}\n" -H "Authorization: Bearer $TOKEN" %[6]s/api/search; done
  # the RateLimit-Policy and RateLimit headers (and Retry-After on a 429)
  curl -i -H "Authorization: Bearer $TOKEN" %[6]s/api/search
  # reindex is 2/minute per user: 200, 200, then 429 until the minute is over
  for i in 1 2 3; do curl -s -o /dev/null -w "%%{http_code}\n" -H "Authorization: Bearer $TOKEN" %[6]s/api/kb/kb-01/reindex; done
  # the 429 as an RFC 9457 problem document (Content-Type: application/problem+json)
  curl -i -H "Authorization: Bearer $TOKEN" %[6]s/api/kb/kb-01/reindex
  # a token of the pro plan gets the plan's limits: reindex is 20/minute, all 200
  for i in 1 2 3; do curl -s -o /dev/null -w "%%{http_code}\n" -H "Authorization: Bearer $PRO_TOKEN" %[6]s/api/kb/kb-01/reindex; done
  # login counts only failures (5/minute per client IP): the right password is never counted, 200 each time
  for i in $(seq 1 8); do curl -s -o /dev/null -w "%%{http_code}\n" -d '{"user":"demo-user","password":"%[7]s"}' %[6]s/login; done
  # a wrong password counts: 401 five times, then 429 for any login, until the minute is over
  for i in $(seq 1 6); do curl -s -o /dev/null -w "%%{http_code}\n" -d '{"user":"demo-user","password":"guess"}' %[6]s/login; done
  # a super-admin is never limited, and gets no RateLimit headers: always 200
  for i in $(seq 1 5); do curl -s -o /dev/null -w "%%{http_code}\n" -H "Authorization: Bearer $ADMIN_TOKEN" %[6]s/api/kb/kb-01/reindex; done
  # exempt paths are never counted
  curl -i %[6]s/health

Ctrl-C stops the server.
`, superAdmin, int(tokenTTL.Hours()), user, pro, admin, base, demoPassword)
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
