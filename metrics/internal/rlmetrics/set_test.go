package rlmetrics

import (
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

func TestSet(t *testing.T) {
	made := map[string]int{}
	s := NewSet(3, "(other)", func(v string) *string { made[v]++; return &v })
	for _, v := range []string{"a", "b", "a", "", "d", "e", "\xff", "(other)", "b"} {
		got := *s.Get(v)
		want := v
		if v == "d" || v == "e" || v == "\xff" {
			want = "(other)"
		}
		if got != want {
			t.Errorf("Get(%q) = %q, want %q", v, got, want)
		}
	}
	// Each value made once, the overflow value once for all.
	if len(made) != 4 || made["a"] != 1 || made["b"] != 1 || made[""] != 1 || made["(other)"] != 1 {
		t.Errorf("made %v, want a, b, \"\" and (other) once each", made)
	}
	seen := map[string]string{}
	s.Range(func(v string, p *string) { seen[v] = *p })
	if len(seen) != 4 || seen["(other)"] != "(other)" || seen["a"] != "a" {
		t.Errorf("Range saw %v, want a, b, \"\" and (other)", seen)
	}
	// A value added by another goroutine between Get's look and its lock
	// is found again under the lock, not made twice.
	if got := *s.add("a"); got != "a" || made["a"] != 1 {
		t.Errorf("add of a known value = %q, made %d times; want the known one", got, made["a"])
	}
	if n := testing.AllocsPerRun(100, func() { s.Get("a") }); n != 0 {
		t.Errorf("Get of a known value allocates %v times", n)
	}
}

// TestSetConcurrent has goroutines add the same values at once (run with
// -race): every value gets one V.
func TestSetConcurrent(t *testing.T) {
	var made atomic.Int64
	s := NewSet(MaxRules, OtherRule, func(string) *atomic.Int64 { made.Add(1); return new(atomic.Int64) })
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 2000 {
				s.Get("r" + strconv.Itoa(i%100)).Add(1)
			}
		})
	}
	wg.Wait()
	var total int64
	s.Range(func(_ string, c *atomic.Int64) { total += c.Load() })
	if made.Load() != 100 || total != 8000 {
		t.Errorf("%d made, %d counted; want 100 and 8000", made.Load(), total)
	}
}

type statsStore struct{ store.Store }

func (statsStore) Stats() store.Stats { return store.Stats{Store: "memory", Keys: 3} }

type reloading struct{ store store.Store }

func (r reloading) Store() store.Store          { return r.store }
func (reloading) ReloadStats() core.ReloadStats { return core.ReloadStats{Reloads: 2} }

type plain struct{ store store.Store }

func (p plain) Store() store.Store { return p.store }

func TestWatchedRead(t *testing.T) {
	var w Watched
	if s := w.Read(); s.HasStore || s.HasReload || w.Config() != nil {
		t.Errorf("zero Watched reads %+v, config %v", s, w.Config())
	}
	for _, tc := range []struct {
		src                 Source
		hasStore, hasReload bool
	}{
		{nil, false, false},
		{plain{memstoreWithoutStats()}, false, false},
		{plain{statsStore{memstore.New()}}, true, false},
		{reloading{statsStore{memstore.New()}}, true, true},
	} {
		w.Watch(tc.src)
		s := w.Read()
		if s.HasStore != tc.hasStore || s.HasReload != tc.hasReload || (s.HasStore && s.Store.Keys != 3) || (s.HasReload && s.Reload.Reloads != 2) {
			t.Errorf("Read of %T = %+v, want stats %v, reloads %v", tc.src, s, tc.hasStore, tc.hasReload)
		}
	}
	cfg, err := core.NewConfig(core.Spec{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	w.Watch(core.NewLimiter(cfg, core.WithStore(memstore.New())))
	if w.Config() != cfg {
		t.Errorf("Config() = %p, want the limiter's %p", w.Config(), cfg)
	}
}

// memstoreWithoutStats returns a store without a Stats method.
func memstoreWithoutStats() store.Store { return struct{ store.Store }{memstore.New()} }

func TestPin(t *testing.T) {
	s := NewSet(MaxRules, OtherRule, func(v string) *string { return &v })
	if _, ok := s.Pinned("a"); ok {
		t.Error("Pinned before any Pin")
	}
	names := make([]string, 100)
	for i := range names {
		names[i] = "rule-" + strconv.Itoa(i) // each its own allocation
	}
	s.Pin(names)
	for _, n := range names {
		v, ok := s.Pinned(n)
		if !ok || v != s.Get(n) || *v != n {
			t.Fatalf("Pinned(%q) = %v, %v; want Get's V", n, v, ok)
		}
	}
	if v, ok := s.Pinned(""); !ok || v != s.Get("") {
		t.Errorf("Pinned(\"\") = %v, %v; want Get(\"\")'s V", v, ok)
	}
	// The same bytes elsewhere, or a prefix at the same address, are
	// other strings: not pinned.
	if _, ok := s.Pinned(strings.Clone(names[7])); ok {
		t.Error("a copy of a pinned name is pinned")
	}
	if _, ok := s.Pinned(names[7][:4]); ok {
		t.Error("a prefix of a pinned name is pinned")
	}
	// A new Pin replaces the old.
	s.Pin(names[:1])
	if _, ok := s.Pinned(names[7]); ok {
		t.Error("a name of an earlier Pin is still pinned")
	}
	if n := testing.AllocsPerRun(100, func() { s.Pinned(names[0]) }); n != 0 {
		t.Errorf("Pinned allocates %v times", n)
	}
}

// TestRules: the rules of the watched limiter's configuration are pinned
// on the first name Rules does not recognise, and again after a reload.
func TestRules(t *testing.T) {
	cfg := func(rules ...string) *core.Config {
		spec := core.Spec{Enabled: true}
		for _, r := range rules {
			spec.Rules = append(spec.Rules, core.RuleSpec{Name: strings.Clone(r), Paths: []string{"/" + r}, Limit: []string{"1/second"}})
		}
		c, err := core.NewConfig(spec)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var w Watched
	r := NewRules(&w, func(v string) *string { return &v })
	c1 := cfg("search", "upload")
	lim := core.NewLimiter(c1, core.WithStore(memstore.New()), core.WithLogger(slog.New(slog.DiscardHandler)))
	search := c1.Rules()[0].Name
	if *r.Get(search) != "search" {
		t.Fatal("Get(search)")
	}
	if _, ok := r.Pinned(search); ok {
		t.Error("pinned with nothing watched")
	}
	w.Watch(lim)
	r.Get(strings.Clone("other")) // not pinned: pins the configuration
	for _, rule := range append(c1.Rules(), c1.Default()) {
		if v, ok := r.Pinned(rule.Name); !ok || *v != rule.Name {
			t.Errorf("Pinned(%q) = %v, %v after a miss", rule.Name, v, ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { r.Get(search) }); n != 0 {
		t.Errorf("Get of a pinned rule allocates %v times", n)
	}
	c2 := cfg("search", "reindex")
	lim.SetConfig(c2)
	if v := r.Get(c2.Rules()[1].Name); *v != "reindex" {
		t.Errorf("Get(reindex) = %q", *v)
	}
	if _, ok := r.Pinned(c2.Rules()[0].Name); !ok {
		t.Error("the new configuration's rules are not pinned after a miss")
	}
	if _, ok := r.Pinned(search); ok {
		t.Error("the old configuration's rule is still pinned")
	}
	// The V of a name does not depend on the way in.
	if r.Get(c2.Rules()[0].Name) != r.Get(search) {
		t.Error("search has two Vs")
	}
}

// TestRulesConcurrent gets rules while the configuration is swapped (run
// with -race): every name keeps one V.
func TestRulesConcurrent(t *testing.T) {
	var w Watched
	var made atomic.Int64
	r := NewRules(&w, func(v string) *atomic.Int64 { made.Add(1); return new(atomic.Int64) })
	cfgs := make([]*core.Config, 4)
	for i := range cfgs {
		c, err := core.NewConfig(core.Spec{Enabled: true, Rules: []core.RuleSpec{
			{Name: "a", Paths: []string{"/a"}, Limit: []string{strconv.Itoa(i+1) + "/second"}},
			{Name: "b", Paths: []string{"/b"}, Limit: []string{"1/second"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		cfgs[i] = c
	}
	lim := core.NewLimiter(cfgs[0], core.WithStore(memstore.New()), core.WithLogger(slog.New(slog.DiscardHandler)))
	w.Watch(lim)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			lim.SetConfig(cfgs[i%len(cfgs)])
		}
	})
	for range 2 {
		wg.Go(func() {
			for i := range 4000 {
				c := cfgs[i%len(cfgs)]
				r.Get(c.Rules()[i%2].Name).Add(1)
			}
		})
	}
	wg.Wait()
	var total int64
	r.Range(func(_ string, c *atomic.Int64) { total += c.Load() })
	// a, b, and what every configuration pins besides: default and "".
	var names []string
	r.Range(func(n string, _ *atomic.Int64) { names = append(names, n) })
	if made.Load() != 4 || total != 8000 {
		t.Errorf("%d made (%q), %d counted; want 4 and 8000", made.Load(), names, total)
	}
}
