package core

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// waitRule is a configuration of one rule, search, of limit and wait
// lines more.
func waitRule(t testing.TB, limit, more string) *Config {
	t.Helper()
	return mustParse(t, "rate_limit:\n  enabled: true\n  rules:\n    - name: search\n      paths: [/api/search]\n      limit: "+limit+"\n"+more)
}

// queues counts the queues of the limiter's wait room.
func (r *waitRoom) queues() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		n += len(s.queues)
		s.mu.Unlock()
	}
	return n
}

// nowClock reads time.Now: a synctest bubble's time.
type nowClock struct{}

func (nowClock) Now() int64 { return time.Now().UnixNano() }

// TestWaitFastPathAllocs: a rule with wait whose request is admitted at
// once allocates nothing, as one without.
func TestWaitFastPathAllocs(t *testing.T) {
	if raceOn {
		t.Skip("the race detector allocates")
	}
	l := NewLimiter(waitRule(t, "2000000000/hour", "      wait: 2s\n"))
	ctx := context.Background()
	if d := l.Decide(ctx, "GET", "/api/search", "alice", false); !d.Allowed || d.Waited != 0 {
		t.Fatalf("got allowed %v, waited %v", d.Allowed, d.Waited)
	}
	if n := testing.AllocsPerRun(100, func() { _ = l.Decide(ctx, "GET", "/api/search", "alice", false) }); n != 0 {
		t.Errorf("%v allocations per decision, want 0", n)
	}
}

// TestWaitRoomEmpties: once every held request has left, admitted,
// refused or gone, the room holds no queue and counts no waiter.
func TestWaitRoomEmpties(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(waitRule(t, "1/second", "      algorithm: gcra\n      wait: 2s\n"), WithClock(nowClock{}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan bool, 40)
		for k := range 10 {
			for i := range 4 {
				c := context.Background()
				if i == 1 {
					c = ctx
				}
				go func() { done <- l.Decide(c, "GET", "/api/search", fmt.Sprint("user", k), false).Allowed }()
			}
		}
		synctest.Wait()
		if held, q := l.waits.held.Load(), l.waits.queues(); held == 0 || q != 10 {
			t.Fatalf("holding %d requests in %d queues, want some in 10", held, q)
		}
		cancel()
		allowed := 0
		for range 40 {
			if <-done {
				allowed++
			}
		}
		if held, q := l.waits.held.Load(), l.waits.queues(); held != 0 || q != 0 {
			t.Errorf("holding %d requests in %d queues, want none", held, q)
		}
		if allowed < 20 || allowed > 30 {
			t.Errorf("%d admitted, want 2 or 3 a key", allowed)
		}
	})
}

// TestWaitRoomBound: the room holds at most maxHeld waiters, across keys;
// past it a request is not queued, and each that leaves makes room.
func TestWaitRoomBound(t *testing.T) {
	var r waitRoom
	ws := make([]*waiter, maxHeld)
	for i := range ws {
		ws[i] = &waiter{cost: 1, turn: make(chan struct{})}
		if _, ok := r.join(waitKey{"search", fmt.Sprint(i)}, ws[i], 1); !ok {
			t.Fatalf("waiter %d not queued", i)
		}
	}
	if _, ok := r.join(waitKey{"search", "one more"}, &waiter{cost: 1, turn: make(chan struct{})}, 1); ok {
		t.Fatalf("waiter %d queued, want at most %d", maxHeld+1, maxHeld)
	}
	r.leave(waitKey{"search", "0"}, ws[0])
	if _, ok := r.join(waitKey{"search", "one more"}, &waiter{cost: 1, turn: make(chan struct{})}, 1); !ok {
		t.Fatal("no room once a waiter left")
	}
	if got := r.queues(); got != maxHeld {
		t.Errorf("%d queues, want %d", got, maxHeld)
	}
}

// TestWaitQueueOrder: a queue's head is its first waiter; when the head
// leaves, the next becomes it (its turn comes); a waiter leaving from
// the middle changes no turn; the queue goes with its last waiter.
func TestWaitQueueOrder(t *testing.T) {
	var r waitRoom
	k := waitKey{"search", "alice"}
	ws := make([]*waiter, 4)
	for i := range ws {
		ws[i] = &waiter{cost: int64(i + 1), turn: make(chan struct{})}
		ahead, ok := r.join(k, ws[i], 10)
		if want := int64(i * (i + 1) / 2); !ok || ahead != want {
			t.Fatalf("waiter %d: ahead %d, queued %v; want %d, true", i, ahead, ok, want)
		}
	}
	turns := func() string {
		s := ""
		for _, w := range ws {
			select {
			case <-w.turn:
				s += "T"
			default:
				s += "-"
			}
		}
		return s
	}
	steps := []struct {
		leave int
		want  string
	}{{-1, "T---"}, {2, "T---"}, {0, "TT--"}, {1, "TT-T"}, {3, "TT-T"}}
	for _, s := range steps {
		if s.leave >= 0 {
			r.leave(k, ws[s.leave])
		}
		if got := turns(); got != s.want {
			t.Errorf("after %d left: turns %s, want %s", s.leave, got, s.want)
		}
	}
	r.leave(k, ws[3]) // twice: nothing
	if r.held.Load() != 0 || r.queues() != 0 {
		t.Errorf("holding %d in %d queues, want none", r.held.Load(), r.queues())
	}
}
