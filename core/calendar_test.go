package core

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin, on machines without a zone database

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// llmConfig is an LLM API's quota: 3 calls a day and 5 a month in
// Europe/Berlin (small, for tests), a default of 2 a day in UTC, and a
// plan with larger quotas.
const llmConfig = `rate_limit:
  enabled: true
  rules:
    - name: llm
      paths: [/v1/chat]
      window: calendar
      timezone: Europe/Berlin
      limit: ["3/day", "5/month"]
  default: "2/day"
  default_window: calendar
  tiers:
    pro:
      default: "20/day"
      rules:
        llm: ["30/day", "500/month"]
`

func TestCalendarConfig(t *testing.T) {
	c := mustParse(t, llmConfig)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for _, tt := range []struct {
		r    *Rule
		zone string
		want string
	}{
		{c.Rule("llm"), "Europe/Berlin", "[3/day 5/month]"},
		{c.Default(), "UTC", "[2/day]"},
		{c.PlanRule("pro", "llm"), "Europe/Berlin", "[30/day 500/month]"},
		{c.PlanRule("pro", "default"), "UTC", "[20/day]"},
	} {
		p := tt.r.Policy
		if p.Location == nil || p.Location.String() != tt.zone || !p.Calendar() || p.Algorithm != algo.FixedWindow {
			t.Errorf("%s: location %v, calendar %v, %v", p.Name, p.Location, p.Calendar(), p.Algorithm)
		}
		if got := fmtLimits(p.Limits); got != tt.want {
			t.Errorf("%s: limits %s, want %s", p.Name, got, tt.want)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	if c.Rule("llm").Policy.Location.String() != berlin.String() {
		t.Errorf("zone %v", c.Rule("llm").Policy.Location)
	}
	// The same rule in another zone counts apart: another fingerprint.
	ny := mustParse(t, strings.Replace(llmConfig, "Europe/Berlin", "America/New_York", 1))
	if ny.Rule("llm").Policy.Fingerprint() == c.Rule("llm").Policy.Fingerprint() {
		t.Errorf("Berlin's and New York's days share counters")
	}
}

func fmtLimits(ls []algo.Limit) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.String())
	}
	return "[" + strings.Join(s, " ") + "]"
}

func TestCalendarConfigErrors(t *testing.T) {
	rule := func(lines ...string) string {
		return yamlLines(append([]string{"rate_limit:", "  rules:", "    - name: llm", "      paths: [/v1/chat]"}, lines...)...)
	}
	const calendarUnits = `a calendar window counts per day, month or year, not per `
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"a month without a calendar window", rule(`      limit: ["1000/day", "20000/month"]`),
			[]string{`rate-limit config t.yaml:5: rule "llm": field "limit": value "20000/month": limit "20000/month": a month is a calendar period: add window: calendar to the rule (its limits then count per calendar day, month or year)`}},
		{"a year in the default", yamlLines("rate_limit:", "  default: 5/year"),
			[]string{`rate-limit config t.yaml:2: rule "default": field "limit": value "5/year": limit "5/year": a year is a calendar period: add default_window: calendar to the rate_limit section (its limits then count per calendar day, month or year)`}},
		{"a minute in a calendar window", rule("      window: calendar", `      limit: ["10/minute", "1000/day"]`),
			[]string{`rate-limit config t.yaml:6: rule "llm": field "limit": value "10/minute": limit "10/minute": ` + calendarUnits + `"minute"`}},
		{"two days", rule("      window: calendar", "      limit: 100/2days"),
			[]string{`rate-limit config t.yaml:6: rule "llm": field "limit": value "100/2days": limit "100/2days": ` + calendarUnits + `"2days"`}},
		{"an hour in the default's calendar window", yamlLines("rate_limit:", "  default_window: calendar", "  default: 100/hour"),
			[]string{`rate-limit config t.yaml:3: rule "default": field "limit": value "100/hour": limit "100/hour": ` + calendarUnits + `"hour"`}},
		{"two limits per day", rule("      window: calendar", `      limit: ["1000/day", "500/d"]`),
			[]string{`rate-limit config t.yaml:6: rule "llm": field "limit": value "500/d": a second limit per calendar day (first: 1000/day)`}},
		{"the rule's algorithm", rule("      window: calendar", "      algorithm: gcra", "      limit: 1000/day"),
			[]string{`rate-limit config t.yaml:6: rule "llm": field "algorithm": value "gcra": calendar windows count with fixed_window, not gcra (window: calendar)`}},
		{"the rule's sliding window", rule("      algorithm: sliding_window", "      window: calendar", "      limit: 1000/day"),
			[]string{`rate-limit config t.yaml:5: rule "llm": field "algorithm": value "sliding_window": calendar windows count with fixed_window, not sliding_window (window: calendar)`}},
		{"the file's algorithm", yamlLines("rate_limit:", "  algorithm: token_bucket", "  default: 10/second", "  rules:", "    - name: llm", "      paths: [/v1/chat]", "      window: calendar", "      limit: 1000/day"),
			[]string{`rate-limit config t.yaml:7: rule "llm": field "window": value "calendar": calendar windows count with fixed_window, not token_bucket (the file's algorithm): set algorithm: fixed_window on the rule`}},
		{"the default's algorithm", yamlLines("rate_limit:", "  algorithm: gcra", "  default_window: calendar", "  default: 1000/day"),
			[]string{`rate-limit config t.yaml:2: rule "default": field "algorithm": value "gcra": calendar windows count with fixed_window, not gcra (default_window: calendar)`}},
		{"a calendar default without a default", yamlLines("rate_limit:", "  enabled: true", "  default_window: calendar"),
			[]string{`rate-limit config t.yaml:3: rule "default": field "default_window": value "calendar": a calendar default limit needs a default of limits per day, month or year (default: "10000/day"): the built-in 120/minute is not one`}},
		{"an unknown window", rule("      window: weekly", "      limit: 1000/day"),
			[]string{`rate-limit config t.yaml:5: rule "llm": field "window": value "weekly": want calendar (limits per calendar day, month or year), or no window for windows of each limit's own period`}},
		{"an unknown default window", yamlLines("rate_limit:", "  default_window: rolling"),
			[]string{`rate-limit config t.yaml:2: rule "default": field "default_window": value "rolling": want calendar (limits per calendar day, month or year), or no default_window for windows of each limit's own period`}},
		{"an unknown time zone", rule("      window: calendar", "      timezone: Europe/Berln", "      limit: 1000/day"),
			[]string{`rate-limit config t.yaml:6: rule "llm": field "timezone": value "Europe/Berln": unknown time zone "Europe/Berln": want an IANA name such as Europe/Berlin, or UTC (a program on a system without a time zone database embeds Go's with import _ "time/tzdata")`}},
		{"a path for a time zone", rule("      window: calendar", "      timezone: ../../etc/passwd", "      limit: 1000/day"),
			[]string{`rate-limit config t.yaml:6: rule "llm": field "timezone": value "../../etc/passwd": unknown time zone "../../etc/passwd": want an IANA name such as Europe/Berlin, or UTC (a program on a system without a time zone database embeds Go's with import _ "time/tzdata")`}},
		{"the machine's time zone", rule("      window: calendar", "      timezone: Local", "      limit: 1000/day"),
			[]string{`rate-limit config t.yaml:6: rule "llm": field "timezone": value "Local": "Local" is this machine's time zone, which other replicas may not share: name the zone, such as UTC or Europe/Berlin`}},
		{"a time zone without a calendar window", rule("      timezone: Europe/Berlin", "      limit: 1000/day"),
			[]string{`rate-limit config t.yaml:5: rule "llm": field "timezone": value "Europe/Berlin": a time zone applies to window: calendar only`}},
		{"a default time zone without a calendar window", yamlLines("rate_limit:", "  default_timezone: Europe/Berlin"),
			[]string{`rate-limit config t.yaml:2: rule "default": field "default_timezone": value "Europe/Berlin": a time zone applies to default_window: calendar only`}},
		{"a plan's minute for a calendar rule", rule("      window: calendar", "      limit: 1000/day", "  tiers:", "    pro:", "      rules:", "        llm: 100/minute"),
			[]string{`rate-limit config t.yaml:10: rule "llm": field "tiers.pro.limit": value "100/minute": limit "100/minute": ` + calendarUnits + `"minute"`}},
		{"a plan's month for a rolling rule", rule("      limit: 1000/day", "  tiers:", "    pro:", "      rules:", "        llm: 100/month"),
			[]string{`rate-limit config t.yaml:9: rule "llm": field "tiers.pro.limit": value "100/month": limit "100/month": a month is a calendar period: add window: calendar to the rule (its limits then count per calendar day, month or year)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.doc), "t.yaml")
			checkConfigError(t, err, tt.want...)
		})
	}
}

// TestCalendarHeaders decides through a Limiter on a fake clock, around
// Berlin's 2025-03-30, a day of 23 hours in a month of 31 days less an
// hour: the draft headers show each period's length (w) and the time to
// its end (t), Retry-After the wait to midnight, and the legacy headers
// the deciding limit's reset.
func TestCalendarHeaders(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	c := mustParse(t, llmConfig)
	clock := store.NewManualClock(time.Date(2025, 3, 29, 23, 0, 0, 0, berlin))
	l := NewLimiter(c, WithClock(clock))
	ctx := context.Background()
	decide := func() (Decision, http.Header) {
		d := l.Decide(ctx, "POST", "/v1/chat", "alice", false)
		h := http.Header{}
		d.SetLimitHeaders(h)
		return d, h
	}
	// Before any decision the policy shows the periods' nominal lengths.
	if got := c.Rule("llm").policyHeader()[0]; got != `"llm-day";q=3;w=86400, "llm-month";q=5;w=2592000` {
		t.Errorf("RateLimit-Policy before any decision: %q", got)
	}
	d, h := decide()
	checkHeaders(t, "March 29, 23:00", h, map[string]string{
		"Ratelimit-Policy": `"llm-day";q=3;w=86400, "llm-month";q=5;w=2674800`,
		"Ratelimit":        `"llm-day";r=2;t=3600, "llm-month";r=4;t=172800`,
	})
	decide()
	decide()
	clock.Advance(30 * time.Minute)
	d, h = decide()
	if d.Allowed || d.RetryAfterSeconds() != 1800 {
		t.Fatalf("the fourth call of the day: allowed %v, Retry-After %d; want denied for 1800 s", d.Allowed, d.RetryAfterSeconds())
	}
	checkHeaders(t, "March 29, 23:30", h, map[string]string{
		"Ratelimit-Policy": `"llm-day";q=3;w=86400, "llm-month";q=5;w=2674800`,
		"Ratelimit":        `"llm-day";r=0;t=1800, "llm-month";r=2;t=171000`,
		"Retry-After":      "1800",
	})
	clock.Advance(30 * time.Minute) // midnight: March 30th, 23 hours
	_, h = decide()
	checkHeaders(t, "March 30, 00:00", h, map[string]string{
		"Ratelimit-Policy": `"llm-day";q=3;w=82800, "llm-month";q=5;w=2674800`,
		"Ratelimit":        `"llm-day";r=2;t=82800, "llm-month";r=1;t=169200`,
	})
	d, h = decide()
	d2, _ := decide() // the month is spent: it denies, with the longer wait
	if d.Allowed != true || d2.Allowed || d2.RetryAfterSeconds() != 169200 || d2.Result.Limit != c.Rule("llm").Policy.Limits[1] {
		t.Fatalf("the month's last call %v; the next %v, Retry-After %d, by %v", d.Allowed, d2.Allowed, d2.RetryAfterSeconds(), d2.Result.Limit)
	}

	// Legacy headers name the deciding limit.
	legacy := NewLimiter(c, WithClock(clock), WithHeaders(HeadersLegacy))
	d = legacy.Decide(ctx, "POST", "/v1/chat", "bob", false)
	h = http.Header{}
	d.SetLimitHeaders(h)
	checkHeaders(t, "legacy", h, map[string]string{
		"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "2", "X-Ratelimit-Reset": "82800",
	})

	// Calendar headers allocate no more than others once a period is
	// rendered.
	if n := testing.AllocsPerRun(100, func() { _ = c.Rule("llm").policyHeader() }); n != 0 {
		t.Errorf("RateLimit-Policy of a calendar rule: %v allocs, want 0", n)
	}
}

// TestCalendarCustomLimits requires a LimitProvider's limits to count
// the way their rule does.
func TestCalendarCustomLimits(t *testing.T) {
	cal := mustParse(t, llmConfig).Rule("llm")
	day, _ := algo.ParseCalendarLimit("100/day")
	for _, tt := range []struct {
		base *Rule
		lims []algo.Limit
		want string
	}{
		{cal, []algo.Limit{{Count: 10, Period: time.Hour}}, "limit 10/hour: the rule counts per calendar period (window: calendar), and so must its limits"},
		{mustParse(t, yamlLines("rate_limit:", "  default: 10/hour")).Default(), []algo.Limit{day}, "limit 100/day: a calendar limit, and the rule counts in windows of each limit's period (its window is not calendar)"},
	} {
		if err := checkVariant(tt.base, tt.lims); err == nil || err.Error() != tt.want {
			t.Errorf("checkVariant(%s, %v) = %v, want %q", tt.base.Name, tt.lims, err, tt.want)
		}
	}
	if err := checkVariant(cal, []algo.Limit{day}); err != nil {
		t.Errorf("checkVariant(llm, 100/day) = %v", err)
	}
}

// TestCalendarProviderLimits counts a LimitProvider's calendar limits for
// a calendar rule in the rule's zone: 1 a day for alice, whose second
// call of the day waits for Berlin's midnight.
func TestCalendarProviderLimits(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	day, _ := algo.ParseCalendarLimit("1/day")
	q := LimitProviderFunc(func(_ context.Context, key, rule string) ([]algo.Limit, bool, error) {
		return []algo.Limit{day}, key == "alice" && rule == "llm", nil
	})
	clock := store.NewManualClock(time.Date(2025, 6, 1, 22, 0, 0, 0, berlin))
	l := NewLimiter(mustParse(t, llmConfig), WithClock(clock), WithLimitProvider(q))
	ctx := context.Background()
	if d := l.Decide(ctx, "POST", "/v1/chat", "alice", false); !d.Allowed || d.Rule.Plan() != CustomPlan || d.Plan != "" || d.Rule.Policy.Location.String() != "Europe/Berlin" {
		t.Fatalf("first call: allowed %v, plan %q, rule plan %q, zone %v", d.Allowed, d.Plan, d.Rule.Plan(), d.Rule.Policy.Location)
	}
	if d := l.Decide(ctx, "POST", "/v1/chat", "alice", false); d.Allowed || d.RetryAfterSeconds() != 7200 {
		t.Fatalf("second call: allowed %v, Retry-After %d; want denied until Berlin's midnight, 7200 s", d.Allowed, d.RetryAfterSeconds())
	}
}
