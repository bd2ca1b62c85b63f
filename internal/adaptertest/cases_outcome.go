package adaptertest

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core"
)

// outcomeConfig has a rule counted by failures (a brute-force guard on
// /login) and one counted by successes.
const outcomeConfig = `
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      methods: ["POST"]
      limit: "3/minute"
      count: failures
    - name: export
      paths: ["/export"]
      limit: "2/minute"
      count: successes
  default: "100/minute"
`

// answering is a request of user for path whose handler answers status.
func answering(method, path string, user []string, status int) req {
	return do(method, path, with(user, []string{StatusHeader, strconv.Itoa(status)})...)
}

// answered is the handler's answer with status and the rate-limit
// headers rl.
func answered(status int, rl ...string) want {
	w := ok(rl...)
	w.status = status
	return w
}

// outcomeCases are the cases of rules counted by outcome (RuleSpec.Count):
// the handler runs before a failure (or success) is counted, the
// headers say what the count will leave, a request is refused before the
// handler once the counter is full, and the requests in flight when it
// fills overshoot it by the bound core.RuleSpec.Count states.
func outcomeCases() []testCase {
	const (
		peekLogin  = "peek X-User:alice login 1"
		takeLogin  = "X-User:alice login 1"
		peekExport = "peek X-User:alice export 1"
	)
	login := func(status int) req { return answering("POST", "/login", alice, status) }
	export := func(status int) req { return answering("GET", "/export", alice, status) }
	rl := func(r, t int) []string { return draft("login", 3, 60, r, t) }
	flight := &inFlight{}
	return []testCase{
		{
			name:   "CountFailures",
			config: outcomeConfig,
			redis:  true,
			steps: []step{
				// Successes are never counted: the headers show what a
				// failure would leave.
				{req: login(200), want: answered(200, rl(2, 60)...), take: peekLogin},
				{req: login(302), want: answered(302, rl(2, 60)...), take: peekLogin},
				{req: do("POST", "/login", alice...), want: answered(200, rl(2, 60)...), take: peekLogin}, // no status written
				{req: login(401), want: answered(401, rl(2, 60)...), take: peekLogin + "; " + takeLogin},
				{req: login(200), want: answered(200, rl(1, 60)...), take: peekLogin},
				{req: login(403), want: answered(403, rl(1, 60)...), take: peekLogin + "; " + takeLogin},
				{adv: 10 * time.Second},
				{req: login(500), want: answered(500, rl(0, 50)...), take: peekLogin + "; " + takeLogin},
				// Full: refused before the handler, success or failure.
				{req: login(200), want: limited("login", "50", rl(0, 50)...), take: peekLogin},
				{req: login(401), want: limited("login", "50", rl(0, 50)...), take: peekLogin},
				// Another caller, and another method, count apart.
				{req: answering("POST", "/login", bob, 401), want: answered(401, draft("login", 3, 60, 2, 50)...), take: "peek X-User:bob login 1; X-User:bob login 1"},
				{req: answering("GET", "/login", alice, 401), want: answered(401, draft("default", 100, 60, 99, 50)...), take: "X-User:alice default 1"},
				{adv: 50 * time.Second},
				{req: login(401), want: answered(401, rl(2, 60)...), take: peekLogin + "; " + takeLogin},
			},
		},
		{
			name:   "CountSuccesses",
			config: outcomeConfig,
			steps: []step{
				{req: export(404), want: answered(404, draft("export", 2, 60, 1, 60)...), take: peekExport},
				{req: export(201), want: answered(201, draft("export", 2, 60, 1, 60)...), take: peekExport + "; X-User:alice export 1"},
				{req: export(500), want: answered(500, draft("export", 2, 60, 0, 60)...), take: peekExport},
				{req: export(200), want: answered(200, draft("export", 2, 60, 0, 60)...), take: peekExport + "; X-User:alice export 1"},
				{req: export(400), want: limited("export", "60", draft("export", 2, 60, 0, 60)...), take: peekExport},
			},
		},
		{
			// A success clears the failures of the key it counted under,
			// and only those: the limit's failures are admitted again,
			// and bob's count is kept.
			name:   "ClearOnSuccess",
			config: strings.Replace(outcomeConfig, "count: failures", "count: failures\n      clear_on_success: true", 1),
			redis:  true,
			steps: []step{
				{req: login(401), want: answered(401, rl(2, 60)...), take: peekLogin + "; " + takeLogin},
				{req: answering("POST", "/login", bob, 401), want: answered(401, rl(2, 60)...), take: "peek X-User:bob login 1; X-User:bob login 1"},
				{req: login(403), want: answered(403, rl(1, 60)...), take: peekLogin + "; " + takeLogin},
				{adv: 10 * time.Second},
				{req: login(200), want: answered(200, rl(0, 50)...), take: peekLogin + "; reset X-User:alice login"},
				{req: login(401), want: answered(401, rl(2, 50)...), take: peekLogin + "; " + takeLogin},
				{req: login(401), want: answered(401, rl(1, 50)...), take: peekLogin + "; " + takeLogin},
				{req: login(500), want: answered(500, rl(0, 50)...), take: peekLogin + "; " + takeLogin},
				// Full: refused before the handler, and a refused success
				// clears nothing.
				{req: login(200), want: limited("login", "50", rl(0, 50)...), take: peekLogin},
				{req: login(401), want: limited("login", "50", rl(0, 50)...), take: peekLogin},
				{req: answering("POST", "/login", bob, 401), want: answered(401, rl(1, 50)...), take: "peek X-User:bob login 1; X-User:bob login 1"},
			},
		},
		{
			// Fail-open: the check fails and the request passes without
			// headers; its failure is still taken, which fails too.
			name:    "CountFailuresStoreDown",
			config:  outcomeConfig,
			failing: true,
			steps: []step{
				{req: login(401), want: answered(401), take: peekLogin + "; " + takeLogin},
				{req: login(200), want: answered(200), take: peekLogin},
			},
			warnings: 1, // the other failures fall within the warn interval
		},
		{
			name:    "CountFailuresStoreDownClosed",
			config:  outcomeConfig,
			failing: true,
			setup:   func(s *Setup) { s.FailOpen = ptr(false) },
			steps: []step{
				{req: login(401), want: unavailable(), take: peekLogin},
			},
			warnings: 1,
		},
		{
			// Limit 3, two failures counted, then C requests in the handler
			// at once: all pass the check, one count fills the counter,
			// C − 1 are served uncounted (limit + C − 1 handled), and
			// the next request is refused before the handler.
			name:   "CountFailuresInFlight",
			config: outcomeConfig,
			setup:  flight.hold,
			run:    flight.run,
		},
	}
}

// inFlight holds requests in the handler until C of them are there.
type inFlight struct {
	armed   atomic.Bool
	in      sync.WaitGroup
	release chan struct{}
}

// hold makes the handler wait, once armed, until release is closed.
func (f *inFlight) hold(s *Setup) {
	served := s.Served
	s.Served = func(id string, err error) {
		served(id, err)
		if f.armed.Load() {
			f.in.Done()
			<-f.release
		}
	}
}

func (f *inFlight) run(e *env) {
	const limit, c = 3, 8
	t := e.t
	for i := range limit - 1 {
		e.step(i, step{req: answering("POST", "/login", alice, 401), want: answered(401, draft("login", limit, 60, limit-1-i, 60)...),
			take: "peek X-User:alice login 1; X-User:alice login 1"})
	}
	f.release = make(chan struct{})
	f.in.Add(c)
	f.armed.Store(true)
	type result struct {
		resp *Response
		err  error
	}
	results := make(chan result, c)
	for range c {
		go func() {
			resp, err := e.send(answering("POST", "/login", alice, 401))
			results <- result{resp, err}
		}()
	}
	f.in.Wait() // all C in the handler, past the check
	close(f.release)
	for range c {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		// Each passed the check with one failure left to count.
		checkResponse(t, "request in flight", r.resp, answered(401, draft("login", limit, 60, 0, 60)...))
	}
	f.armed.Store(false)
	takes, events := e.rec.drain()
	peeks, counts, counted, overshoot := 0, 0, 0, 0
	for _, tk := range takes {
		switch tk {
		case "peek X-User:alice login 1":
			peeks++
		case "X-User:alice login 1":
			counts++
		default:
			t.Errorf("store call %q", tk)
		}
	}
	for _, ev := range events {
		switch {
		case ev.Rule == "login" && ev.Outcome == core.OutcomeAllowed && ev.Allowed && ev.Cost == 1:
			counted++
		case ev.Rule == "login" && ev.Outcome == core.OutcomeOvershoot && ev.Allowed && ev.Cost == 1:
			overshoot++
		default:
			t.Errorf("event %+v", ev)
		}
	}
	if served := e.served.Swap(0); served != c || peeks != c || counts != c || counted != 1 || overshoot != c-1 {
		t.Fatalf("%d in flight: handler ran %d times, %d checks, %d counts of which %d admitted and %d denied; want %d, %d, %d, 1, %d",
			c, served, peeks, counts, counted, overshoot, c, c, c, c-1)
	}
	// limit − 1 + C = limit + C − 1 failures were handled; the counter is
	// at the limit, and the next request is refused before the handler.
	e.step(limit-1, step{req: answering("POST", "/login", alice, 401), want: limited("login", "60", draft("login", limit, 60, 0, 60)...),
		take: "peek X-User:alice login 1"})
}

// checkDeferred checks the observer events of a step under a rule
// counted by outcome (s.take starts with its check, a peek): one event,
// sent when the request was refused before the handler or, for one that
// reached it, once it was answered. calls are the store calls wanted.
func (e *env) checkDeferred(where string, s step, calls []string, events []core.Event) {
	t := e.t
	t.Helper()
	f := strings.Fields(strings.TrimPrefix(calls[0], "peek "))
	key, rule, cost := f[0], f[1], f[2]
	served := s.want.status == http.StatusOK || s.want.body == OKBody
	outcome, evCost := core.OutcomeAllowed, cost
	switch {
	case e.failing:
		outcome = core.OutcomeStoreError
	case !served:
		outcome = core.OutcomeDenied
	case len(calls) == 1 || strings.HasPrefix(calls[1], "reset "):
		evCost = "0" // served, and its status not counted (a success may clear the failures)
	case strings.HasPrefix(calls[1], "charge "):
		evCost = calls[1][strings.LastIndexByte(calls[1], ' ')+1:] // charged what the handler reported
	}
	if len(calls) > 2 || len(events) != 1 {
		t.Fatalf("%s: %d store calls and %d events; want a check, maybe a count, and one event", where, len(calls), len(events))
	}
	ev := events[0]
	if ev.Rule != rule || strconv.FormatInt(ev.Cost, 10) != evCost || ev.Allowed != served || ev.Outcome != outcome ||
		e.rec.clear(ev.Key) != key || (ev.Err != nil) != e.failing || ev.Latency != 0 {
		t.Fatalf("%s: observer: got %+v, want rule %s, key %s, cost %s, allowed %v, outcome %v, error %v, latency 0",
			where, ev, rule, key, evCost, served, outcome, e.failing)
	}
}
