package core_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// TestDecideTo: DecideTo writes the Decision Decide returns into a
// Decision that held another request's (every field overwritten), for a
// counted request, an exempt path, a bypassed caller and a key function's
// error (zero), and it allocates nothing.
func TestDecideTo(t *testing.T) {
	cfg, err := core.NewConfig(core.Spec{
		Enabled:     true,
		Rules:       []core.RuleSpec{{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"3/hour"}}},
		ExemptPaths: []string{"/health"},
	})
	if err != nil {
		t.Fatal(err)
	}
	type req struct {
		user   string
		bypass bool
	}
	errKey := errors.New("bad token")
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	flow := func() *core.Flow[*req] {
		return &core.Flow[*req]{
			Limiter: core.NewLimiter(cfg, core.WithStore(memstore.New(memstore.WithClock(clock)))),
			Key: func(r *req) (string, error) {
				if r.user == "bad" {
					return "", errKey
				}
				return r.user, nil
			},
			Bypass: func(r *req) bool { return r.bypass },
		}
	}
	byValue, inPlace := flow(), flow() // the same configuration, stores of their own
	ctx := context.Background()
	dirty := core.Decision{Allowed: true, ShadowDenied: true, Banned: true, Penalty: true, Rule: cfg.Rule("search"), Cost: 7,
		Result: store.Result{Remaining: 9, RetryAfter: 5}, Err: errKey, Key: "someone", Plan: "gold"}
	for i, c := range []struct {
		r    *req
		path core.Path
	}{
		{&req{user: "alice"}, "/api/search"},
		{&req{user: "alice"}, "/api/search"},
		{&req{user: "alice"}, "/health"},
		{&req{user: "alice", bypass: true}, "/api/search"},
		{&req{user: "bad"}, "/api/search"},
		{&req{user: "alice"}, "/api/search"},
		{&req{user: "alice"}, "/api/search"}, // the fourth: denied
	} {
		want, wantErr := byValue.Decide(ctx, c.r, "GET", c.path, "")
		got := dirty
		gotErr := inPlace.DecideTo(ctx, &got, c.r, "GET", c.path, "")
		if !reflect.DeepEqual(got, want) || gotErr != wantErr {
			t.Errorf("request %d (%s): DecideTo gave %+v, %v; Decide %+v, %v", i, c.path, got, gotErr, want, wantErr)
		}
	}
	if want := (core.Decision{}); !reflect.DeepEqual(func() core.Decision {
		d := dirty
		_ = inPlace.DecideTo(ctx, &d, &req{user: "bad"}, "GET", "/api/search", "")
		return d
	}(), want) {
		t.Error("DecideTo left a Decision that is not zero after the key function's error")
	}
	alice := &req{user: "bob"}
	var d core.Decision
	if n := testing.AllocsPerRun(100, func() { _ = inPlace.DecideTo(ctx, &d, alice, "GET", "/api/search", "") }); n != 0 {
		t.Errorf("DecideTo: %v allocations per request, want 0", n)
	}
}
