package adaptertest

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
)

// waitConfig is a rule of 1 a second (fixed windows) whose requests wait
// up to 2s, at most one of a key at a time.
const waitConfig = `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "1/second"
      wait: 2s
      wait_queue: 1
`

// waitCases are the cases of a rule's wait (core.RuleSpec.Wait).
func waitCases() []testCase {
	return []testCase{{name: "WaitHeld", config: waitConfig, run: waitHeld}}
}

// sent is the answer to a request sent in a goroutine.
type sent struct {
	resp *Response
	err  error
}

// sendAsync sends r under ctx in a goroutine; its answer comes on the
// channel returned.
func (e *env) sendAsync(ctx context.Context, r req) <-chan sent {
	out := make(chan sent, 1)
	go func() {
		resp, err := e.sendContext(ctx, r)
		out <- sent{resp, err}
	}()
	return out
}

// await waits for the limiter's next timer event, which must be want
// ("timer": a request is held; "stop": a held one left before its time).
func (e *env) await(want string) {
	e.t.Helper()
	select {
	case got := <-e.timers:
		if got != want {
			e.t.Fatalf("the limiter's timers: got %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		e.t.Fatalf("no %q from the limiter's timers in 10s", want)
	}
}

// awaitEvents waits until the observer has sent n events since the last
// drain.
func (e *env) awaitEvents(n int) {
	e.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		e.rec.mu.Lock()
		got := len(e.rec.events)
		e.rec.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-e.rec.observed:
		case <-timeout:
			e.t.Fatalf("%d observer events in 10s, want %d", got, n)
		}
	}
}

// received checks that the request sent in s got w.
func (e *env) received(where string, s <-chan sent, w want) {
	e.t.Helper()
	select {
	case r := <-s:
		if r.err != nil {
			e.t.Fatalf("%s: %v", where, r.err)
		}
		checkResponse(e.t, where, r.resp, w)
	case <-time.After(10 * time.Second):
		e.t.Fatalf("%s: no answer in 10s", where)
	}
}

// heldEvents checks the store calls (unless takes is nil) and the
// observer events since the last drain, each "key outcome allowed
// waited".
func (e *env) heldEvents(where string, takes []string, want ...string) {
	e.t.Helper()
	gotTakes, events := e.rec.drain()
	if takes != nil && !slices.Equal(gotTakes, takes) {
		e.t.Fatalf("%s: store calls: got %q, want %q", where, gotTakes, takes)
	}
	if got := eventLines(e, events); !slices.Equal(got, want) {
		e.t.Fatalf("%s: events: got %q, want %q", where, got, want)
	}
}

// eventLines is each event of the search rule at cost 1 as "key outcome
// allowed waited"; another is shown whole.
func eventLines(e *env, events []core.Event) []string {
	var out []string
	for _, ev := range events {
		if ev.Rule != "search" || ev.Cost != 1 || ev.Err != nil {
			out = append(out, "unexpected "+strings.ReplaceAll(strconv.Quote(ev.Rule), `"`, "")+" event: "+ev.Outcome.String())
			continue
		}
		out = append(out, e.rec.clear(ev.Key)+" "+ev.Outcome.String()+" "+strconv.FormatBool(ev.Allowed)+" "+ev.Waited.String())
	}
	return out
}

// waitHeld: at 1 a second with wait: 2s and wait_queue: 1, alice's first
// request is admitted; her second is held (not answered, nothing
// counted), while a third is refused at once, the queue being full, with
// Retry-After 2 (the wait the one ahead makes it), and bob, with a queue
// of his own, is admitted. Once the clock has moved a second, the held
// request is served, with the headers of its count then, having waited
// exactly that second.
func waitHeld(e *env) {
	t := e.t
	alice1 := "X-User:alice search 1"
	e.step(0, step{req: get("/api/search", alice...), want: ok(draft("search", 1, 1, 0, 1)...), take: alice1})
	held := e.sendAsync(context.Background(), get("/api/search", alice...))
	e.await("timer")
	e.heldEvents("the held request, held", []string{alice1})
	e.step(1, step{req: get("/api/search", alice...), want: limited("search", "2", draft("search", 1, 1, 0, 1)...), counted: func(takes []string, events []core.Event) string {
		want := []string{"X-User:alice denied false 0s"}
		if got := eventLines(e, events); !slices.Equal(takes, []string{"peek " + alice1}) || !slices.Equal(got, want) {
			return "refused at once by a full queue: store calls " + strings.Join(takes, "; ") + ", events " + strings.Join(got, "; ") + "; want one peek, one denial"
		}
		return ""
	}})
	e.step(2, step{req: get("/api/search", bob...), want: ok(draft("search", 1, 1, 0, 1)...), take: "X-User:bob search 1"})
	select {
	case r := <-held:
		t.Fatalf("the held request was answered before its time: %+v", r)
	default:
	}
	e.clock.Advance(time.Second)
	e.received("the held request", held, ok(draft("search", 1, 1, 0, 1)...))
	if n := e.served.Swap(0); n != 1 {
		t.Fatalf("the held request: the handler ran %d times, want 1", n)
	}
	e.heldEvents("the held request, served", []string{alice1}, "X-User:alice waited true 1s")
}

// waitClientGoneConfig is waitConfig with the default queue.
const waitClientGoneConfig = `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "1/second"
      wait: 2s
`

// RunWaitClientGone runs, against the adapter start builds, the case of
// a held request (core.RuleSpec.Wait) whose client goes away. cancels
// says that the framework ends a request's context when its client
// closes the connection (net/http, and Gin and Echo on it): the request
// then leaves the queue at once, refused, having consumed nothing, and
// the next request is admitted when the room the first waited for comes,
// as if it had never come. Otherwise (Fiber: fasthttp does not tell) the
// request is served, to no one, when its turn comes, and counted: the
// next request waits for the room after.
func RunWaitClientGone(t *testing.T, start Start, cancels bool) {
	run(t, start, []testCase{{name: "WaitClientGone", config: waitClientGoneConfig, run: func(e *env) { waitClientGone(e, cancels) }}})
}

func waitClientGone(e *env, cancels bool) {
	t := e.t
	alice1 := "X-User:alice search 1"
	e.step(0, step{req: get("/api/search", alice...), want: ok(draft("search", 1, 1, 0, 1)...), take: alice1})
	ctx, cancel := context.WithCancel(context.Background())
	gone := e.sendAsync(ctx, get("/api/search", alice...))
	e.await("timer")
	cancel()
	if r := <-gone; r.err == nil {
		t.Fatalf("the request given up got %d", r.resp.Status)
	}
	if !cancels {
		e.clock.Advance(time.Second)
		e.awaitEvents(1) // its turn came: counted and admitted
		e.heldEvents("the request given up", []string{alice1, alice1}, "X-User:alice waited true 1s")
		next := e.sendAsync(context.Background(), get("/api/search", alice...))
		e.await("timer") // the room is taken: the next request waits
		e.clock.Advance(time.Second)
		e.received("the next request", next, ok(draft("search", 1, 1, 0, 1)...))
		e.heldEvents("the next request", nil, "X-User:alice waited true 1s")
		return
	}
	e.await("stop")
	e.awaitEvents(1)
	if n := e.served.Load(); n != 0 {
		t.Fatalf("the request given up reached the handler %d times", n)
	}
	e.heldEvents("the request given up", []string{alice1}, "X-User:alice denied false 0s")
	e.clock.Advance(time.Second)
	e.step(1, step{req: get("/api/search", alice...), want: ok(draft("search", 1, 1, 0, 1)...), take: alice1})
	select {
	case got := <-e.timers:
		t.Fatalf("the limiter's timers: %q after the request given up left", got)
	default:
	}
}
