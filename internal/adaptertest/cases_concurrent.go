package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// concurrentConfig has a rule that bounds requests in flight only
// (reports, 2 per identity) and one with a limit too (search).
const concurrentConfig = `
rate_limit:
  enabled: true
  rules:
    - name: reports
      paths: ["/reports"]
      concurrent: 2
    - name: search
      paths: ["/api/search"]
      limit: "100/minute"
      concurrent: 1
  default: "1000/minute"
`

// concurrentWaitConfig is a rule of one slot per identity whose
// requests wait for it up to 2s.
const concurrentWaitConfig = `
rate_limit:
  enabled: true
  rules:
    - name: reports
      paths: ["/reports"]
      concurrent: 1
      wait: 2s
`

// concurrentCases are the cases of concurrency limits
// (RuleSpec.Concurrent): requests held in the handler take the slots,
// the next is refused with 429 and Retry-After: 1, and a slot comes back
// when a request ends: answered, panicked or its client gone.
func concurrentCases() []testCase {
	held, panicked, gone, waited := &gate{}, &gate{}, &gate{}, &gate{}
	search := func(r int) []string { return draft("search", 100, 60, r, 60) }
	const take = "X-User:alice search 1"
	return []testCase{
		{
			// In sequence each request ends before the next: the slot
			// comes back every time, and the limit decides.
			name:   "ConcurrentSequential",
			config: strings.Replace(concurrentConfig, `limit: "100/minute"`, `limit: "3/minute"`, 1),
			steps: append(times(3, func(i int) step {
				return hit(get("/api/search", alice...), ok(draft("search", 3, 60, 2-i, 60)...), take)
			}),
				hit(get("/api/search", alice...), limited("search", "60", draft("search", 3, 60, 0, 60)...), take),
				step{req: get("/reports", alice...), want: ok(), counted: slotOnly("reports", core.OutcomeAllowed)},
				step{req: get("/reports", alice...), want: ok(), counted: slotOnly("reports", core.OutcomeAllowed)},
				step{req: get("/reports", alice...), want: ok(), counted: slotOnly("reports", core.OutcomeAllowed)},
			),
		},
		{name: "ConcurrentHeld", config: concurrentConfig, setup: held.hold, run: func(e *env) { held.runHeld(e, search) }},
		{name: "ConcurrentPanic", config: concurrentConfig, setup: panicked.hold, run: panicked.runPanic},
		{name: "ConcurrentDisconnect", config: concurrentConfig, setup: gone.hold, run: gone.runDisconnect},
		{name: "ConcurrentWait", config: concurrentWaitConfig, setup: waited.hold, run: waited.runWait},
	}
}

// slotOnly checks the store calls and events of a request under a rule
// that bounds requests in flight only: no count, and one event of
// outcome o under rule.
func slotOnly(rule string, o core.Outcome) func([]string, []core.Event) string {
	return func(takes []string, events []core.Event) string {
		if len(takes) != 0 || len(events) != 1 || events[0].Rule != rule || events[0].Outcome != o || events[0].Cost != 1 ||
			events[0].Key == "" || events[0].Allowed != (o == core.OutcomeAllowed) {
			return fmt.Sprintf("counts %q, events %+v; want none, and one %v event under %s", takes, events, o, rule)
		}
		return ""
	}
}

// gate holds alice's requests in the handler once armed, each until its
// own channel is closed, and makes the handler panic once when asked.
type gate struct {
	armed  atomic.Bool
	panics atomic.Bool
	in     chan chan struct{} // each held request's channel, as it arrives
}

// errHandlerPanic is what the handler panics with.
var errHandlerPanic = errors.New("adaptertest: the handler panics")

func (g *gate) hold(s *Setup) {
	g.in = make(chan chan struct{}, 16)
	served := s.Served
	s.Served = func(id string, err error) {
		served(id, err)
		if g.panics.CompareAndSwap(true, false) {
			panic(errHandlerPanic)
		}
		if g.armed.Load() && hashed[keyer.Key(id)] == "X-User:alice" {
			release := make(chan struct{})
			g.in <- release
			<-release
		}
	}
}

// inFlightReq is a request held in the handler.
type inFlightReq struct {
	release chan struct{} // closing it (let) lets the handler answer
	once    sync.Once
	done    chan result
}

type result struct {
	resp *Response
	err  error
}

// start sends r under ctx and returns once its handler holds it.
func (g *gate) start(e *env, ctx context.Context, r req) *inFlightReq {
	e.t.Helper()
	f := &inFlightReq{done: make(chan result, 1)}
	go func() {
		resp, err := e.sendContext(ctx, r)
		f.done <- result{resp, err}
	}()
	select {
	case f.release = <-g.in:
		// Should the case fail, the server shuts down with no handler held.
		e.t.Cleanup(f.let)
	case res := <-f.done:
		e.t.Fatalf("%s was answered before the handler held it: %+v", r, res)
	case <-time.After(10 * time.Second):
		e.t.Fatalf("%s never reached the handler", r)
	}
	return f
}

// let lets f's handler answer, once.
func (f *inFlightReq) let() { f.once.Do(func() { close(f.release) }) }

// finish lets f's handler answer and checks the answer.
func (f *inFlightReq) finish(e *env, w want) {
	e.t.Helper()
	f.let()
	r := <-f.done
	if r.err != nil {
		e.t.Fatalf("request held: %v", r.err)
	}
	checkResponse(e.t, "request held", r.resp, w)
}

// awaitRelease waits for one slot of key under rule to be given back
// (passing over those of other keys).
func (e *env) awaitRelease(key, rule string) {
	e.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-e.rec.released:
			if got == key+" "+rule {
				return
			}
		case <-timeout:
			e.t.Fatalf("no slot of %s under %s given back", key, rule)
		}
	}
}

// checkSlots checks that every slot taken was given back once: as many
// releases of each key and rule as acquires that took a slot, and the
// memory store holds none; and that refused is the number of Acquires
// refused.
func (e *env) checkSlots(refused int) {
	e.t.Helper()
	calls := e.rec.drainSlots()
	taken, given := map[string]int{}, map[string]int{}
	n := 0
	for _, c := range calls {
		switch f := strings.Fields(c); {
		case f[0] == "acquire" && len(f) == 4 && f[3] == "refused":
			n++
		case f[0] == "acquire" && len(f) == 3:
			taken[f[1]+" "+f[2]]++
		case f[0] == "release":
			given[f[1]+" "+f[2]]++
		default:
			e.t.Fatalf("slot call %q", c)
		}
	}
	if n != refused || len(taken) == 0 {
		e.t.Fatalf("slot calls %q: %d refused, want %d", calls, n, refused)
	}
	for k, v := range taken {
		if given[k] != v {
			e.t.Fatalf("slot calls %q: %d slots of %s taken, %d given back", calls, v, k, given[k])
		}
	}
	mem := e.rec.store.(*memstore.Store)
	for k := range taken {
		f := strings.Fields(k)
		c := &store.Concurrency{Name: f[1], Limit: 1}
		for hk, name := range hashed {
			if name == f[0] {
				if n := mem.InFlight(hk, c); n != 0 {
					e.t.Fatalf("%d slots of %s still held", n, k)
				}
			}
		}
	}
}

// busy is the answer of a request refused by rule's concurrency limit.
func busy(rule string) want { return limited(rule, "1") }

// runHeld: two of alice's requests held take both slots of reports; the
// third is refused (429, Retry-After: 1, the rule's body, no rate-limit
// header) while bob is admitted; once one ends, one more is admitted.
// Under search (a limit of 100 per minute and one slot), the request
// refused for lack of a slot consumes nothing of the limit.
func (g *gate) runHeld(e *env, search func(r int) []string) {
	g.armed.Store(true)
	bg := context.Background()
	a1 := g.start(e, bg, get("/reports", alice...))
	a2 := g.start(e, bg, get("/reports", alice...))
	e.expect("third in flight", get("/reports", alice...), busy("reports"))
	e.expect("another identity", get("/reports", bob...), ok())
	a1.finish(e, ok())
	e.awaitRelease("X-User:alice", "reports")
	a3 := g.start(e, bg, get("/reports", alice...))
	e.expect("third in flight again", get("/reports", alice...), busy("reports"))
	a2.finish(e, ok())
	a3.finish(e, ok())

	s1 := g.start(e, bg, get("/api/search", alice...))
	e.expect("search in flight", get("/api/search", alice...), busy("search"))
	e.expect("search in flight", get("/api/search", alice...), busy("search"))
	s1.finish(e, ok(search(99)...))
	e.awaitRelease("X-User:alice", "search")
	g.armed.Store(false)
	e.expect("search after", get("/api/search", alice...), ok(search(98)...)) // the refusals took nothing
	e.checkSlots(4)
	_, events := e.rec.drain()
	if n := countOutcome(events, core.OutcomeConcurrencyDenied); n != 4 {
		e.t.Fatalf("%d concurrency_denied events, want 4: %+v", n, events)
	}
}

// runPanic: a request whose handler panics gives its slot back.
func (g *gate) runPanic(e *env) {
	g.armed.Store(true)
	bg := context.Background()
	a1 := g.start(e, bg, get("/reports", alice...))
	g.panics.Store(true)
	if resp, err := e.send(get("/reports", alice...)); err == nil && resp.Status != http.StatusInternalServerError {
		e.t.Fatalf("a handler that panics: status %d, want 500 (or no answer)", resp.Status)
	}
	e.awaitRelease("X-User:alice", "reports")
	a2 := g.start(e, bg, get("/reports", alice...))
	e.expect("third in flight", get("/reports", alice...), busy("reports"))
	a1.finish(e, ok())
	a2.finish(e, ok())
	e.checkSlots(1)
}

// runDisconnect: a request whose client goes away gives its slot back,
// once: when its context ends (net/http cancels it) or, at the latest,
// when its handler returns.
func (g *gate) runDisconnect(e *env) {
	g.armed.Store(true)
	bg := context.Background()
	a1 := g.start(e, bg, get("/reports", alice...))
	ctx, cancel := context.WithCancel(bg)
	a2 := g.start(e, ctx, get("/reports", alice...))
	cancel()
	if r := <-a2.done; r.err == nil {
		e.t.Fatalf("a request whose client went away was answered: %+v", r.resp)
	}
	a2.let() // its handler returns
	e.awaitRelease("X-User:alice", "reports")
	a3 := g.start(e, bg, get("/reports", alice...))
	e.expect("third in flight", get("/reports", alice...), busy("reports"))
	a1.finish(e, ok())
	a3.finish(e, ok())
	e.checkSlots(1)
}

// runWait: under a rule with wait, alice's request that finds her one
// slot taken is held, not answered, while bob is admitted, and reaches
// the handler once the request in flight has answered; the slots all
// come back.
func (g *gate) runWait(e *env) {
	g.armed.Store(true)
	a1 := g.start(e, context.Background(), get("/reports", alice...))
	held := e.sendAsync(context.Background(), get("/reports", alice...))
	e.await("timer") // held: it asks the store again at the latest then
	e.expect("another identity", get("/reports", bob...), ok())
	select {
	case r := <-held:
		e.t.Fatalf("the held request was answered while the slot was taken: %+v", r)
	default:
	}
	a1.finish(e, ok())
	select {
	case release := <-g.in:
		close(release)
	case <-time.After(10 * time.Second):
		e.t.Fatal("the held request never reached the handler")
	}
	e.received("the held request", held, ok())
	e.checkSlots(2) // the held request asked twice: on arrival and at the head of the queue
	_, events := e.rec.drain()
	if n, m := countOutcome(events, core.OutcomeWaited), countOutcome(events, core.OutcomeConcurrencyDenied); n != 1 || m != 0 {
		e.t.Fatalf("%d waited and %d concurrency_denied events, want 1 and 0: %+v", n, m, events)
	}
}

// expect sends r and checks the answer.
func (e *env) expect(what string, r req, w want) {
	e.t.Helper()
	resp, err := e.send(r)
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
	checkResponse(e.t, what+" ("+r.String()+")", resp, w)
}

func countOutcome(events []core.Event, o core.Outcome) int {
	return len(slices.DeleteFunc(slices.Clone(events), func(e core.Event) bool { return e.Outcome != o }))
}
