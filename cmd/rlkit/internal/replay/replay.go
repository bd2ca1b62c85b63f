package replay

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// Options say how a log is read and what a replay keeps.
type Options struct {
	// Format is the log's format, one of Formats: clf (Common or
	// Combined), json, nginx-json, caddy or envoy.
	Format string
	// Fields change where a JSON format finds its fields: "NAME=PATH"
	// (time, method, path, status, ip, user, request, headers, or
	// header:NAME for a field that holds a request header); PATH is a key,
	// or keys joined by '.' into nested objects.
	Fields []string
	// Identity is who a request counts as: "ip" (or ""), the client IP;
	// "field:NAME", a field's value (as an application's key function
	// returns it); "header:NAME", a request header's, as every adapter's
	// HeaderKey counts it (a secret, stored as its keyed hash). A request
	// without one counts under its client IP, as in the service.
	Identity string
	// Plan is where a request's plan is (core.Flow.Plan): "field:NAME" or
	// "header:NAME"; "" for none.
	Plan string
	// FoldCase matches paths without regard to ASCII case, as behind
	// Fiber's default router (core.Flow.FoldCase).
	FoldCase bool
	// IPv6PrefixLen groups IPv6 clients as the service's
	// clientip.Config.IPv6PrefixLen does; 0 means 64.
	IPv6PrefixLen int
	// RefuseShare is the share of a rule's units (its requests weighted,
	// as its limits count them) the recommended limit may refuse; 0 means
	// 0.001.
	RefuseShare float64
	// Top is how many of the keys refused most a rule's report names; 0
	// means 10.
	Top int
	// StatsKeys bounds the keys each rule's figures hold at once; 0
	// means 1,000,000.
	StatsKeys int
	// StoreKeys bounds the memory store's counters, as the service's
	// memstore.WithMaxKeys; 0 means memstore.DefaultMaxKeys.
	StoreKeys int
	// MaxAhead, when above 0, bounds how far a line may jump ahead of
	// the lines around it: a line whose time stamp is more than MaxAhead
	// after both the latest one before it and the one right after it is
	// an outlier (a wrong clock), taken at the time of the latest line
	// before it (the first line of all: at the time of the one after it).
	// 0: no line is.
	MaxAhead time.Duration
	// Progress, when set, is told of every read of a log, in bytes
	// before decompression, from the reading goroutine.
	Progress func(n int64)
}

// topCandidates is how many keys each rule's Space-Saving table holds
// (see topK).
const topCandidates = 1000

// Replayer replays logs through a limiter on the logs' own clock. It is
// used once (Run) and not safe for concurrent use.
type Replayer struct {
	o     Options
	rules *Rules
	p     *lineParser
	clock *store.ManualClock
	store *memstore.Store
	lim   *core.Limiter
	flow  *core.Flow[*Record]
	d     core.Decision
	ctx   context.Context

	events []core.Event // the current request's, from the observer
	cur    *batch       // the batch being decided, which takes the tallies
	stats  map[statKey]*ruleStats
	order  []*ruleStats
	lastK  statKey
	lastS  *ruleStats

	started  bool
	now      int64 // the clock's reading
	min, max int64 // the earliest and latest time stamps
	// setter is the line that last moved the clock ahead, and farthest
	// the one that was farthest ahead of a line after it (by maxLate).
	setter, farthest mark

	// ahead is a line more than MaxAhead ahead of the clock (or the first
	// line), held until the line after it tells whether it is an outlier;
	// aheadFile is its log.
	ahead        *Record
	aheadFile    string
	outliers     int64
	firstOutlier mark

	pending waitHeap
	queued  map[waitKey]int
	seq     int64

	decided, exempt, banned, late, held int64
	maxLate                             int64
}

// New makes a Replayer of rules, reading logs as o says. Its error is a
// problem of o (a bad --field, --identity or --plan).
func New(rules *Rules, o Options) (*Replayer, error) {
	if o.RefuseShare == 0 {
		o.RefuseShare = 0.001
	}
	if o.RefuseShare < 0 || o.RefuseShare >= 1 || math.IsNaN(o.RefuseShare) {
		return nil, fmt.Errorf("--refuse-share %v: want a share above 0 and below 1, such as 0.001", o.RefuseShare)
	}
	if o.Top <= 0 {
		o.Top = 10
	}
	if o.StatsKeys <= 0 {
		o.StatsKeys = 1_000_000
	}
	if o.StoreKeys <= 0 {
		o.StoreKeys = memstore.DefaultMaxKeys
	}
	if o.Format == "" {
		o.Format = "clf"
	}
	cfg := rules.run
	p, err := newLineParser(&o, headers(cfg))
	if err != nil {
		return nil, err
	}
	r := &Replayer{o: o, rules: rules, p: p, ctx: context.Background(), stats: map[statKey]*ruleStats{}, queued: map[waitKey]int{}}
	r.clock = store.NewManualClock(time.Unix(0, 0))
	r.store = memstore.New(memstore.WithClock(r.clock), memstore.WithMaxKeys(o.StoreKeys))
	r.lim = core.NewLimiter(cfg,
		core.WithStore(r.store),
		core.WithClock(r.clock),
		core.WithLogger(slog.New(slog.DiscardHandler)),
		core.WithObserver(func(e core.Event) { r.events = append(r.events, e) }),
	)
	f := &core.Flow[*Record]{
		Limiter:    r.lim,
		ClientIP:   func(rec *Record) string { return rec.IP },
		ClientAddr: func(rec *Record) string { return rec.Addr },
		Header:     func(rec *Record, name string) string { return rec.Header(name) },
		FoldCase:   o.FoldCase,
	}
	switch kind, name, _ := source("--identity", o.Identity, true); kind {
	case "field":
		f.Key = func(rec *Record) (string, error) { return rec.ID, nil }
	case "header":
		f.Key = func(rec *Record) (string, error) { return adapter.HeaderIdentity(name, rec.ID), nil }
	}
	if o.Plan != "" {
		f.Plan = func(rec *Record) string { return rec.Plan }
	}
	r.flow = f
	for _, rule := range append(cfg.Rules()[:len(cfg.Rules()):len(cfg.Rules())], cfg.Default()) {
		if rule != nil {
			r.statsFor(rule.Name, "")
		}
	}
	return r, nil
}

// Run replays the sources in order, as one log, and reports. Its error is
// a source that could not be opened or read; what was replayed before it
// is not reported.
//
// Three goroutines share the work: one reads and parses the logs into
// batches, this one decides each batch's requests and notes what each
// rule counted (tally), and one adds those notes to the rules' per-key
// figures; batches go from one to the next in order and come back to be
// read into again.
func (r *Replayer) Run(srcs []Source) (*Report, error) {
	rd := newReader(r.p, r.o.Progress)
	counted := make(chan *batch, pipeline)
	done := make(chan struct{})
	go rd.run(srcs)
	go func() {
		defer close(done)
		for b := range counted {
			for i := range b.tallies {
				b.tallies[i].count()
			}
			rd.free <- b
		}
	}()
	for b := range rd.out {
		r.cur = b
		for i := range b.recs {
			r.record(&b.recs[i])
		}
		counted <- b
	}
	if r.ahead != nil || len(r.pending) > 0 { // the last line, if held, and the requests still held at the end of the log
		b := <-rd.free
		b.reset()
		r.cur = b
		if a := r.ahead; a != nil { // no line after it: not an outlier
			r.ahead = nil
			r.take(a, r.aheadFile)
		}
		r.due(math.MaxInt64)
		counted <- b
	}
	close(counted)
	<-done
	r.cur = nil
	if rd.err != nil {
		return nil, rd.err
	}
	return r.report(rd), nil
}

// tally is what one rule counted of one request, for the figures kept per
// key: the request's key under the rule, its units, whether the rule
// refused it, and its own time stamp, whose windows its units count in.
type tally struct {
	s       *ruleStats
	key     string
	units   int64
	at      int64
	refused bool
}

func (t *tally) count() {
	if t.refused {
		t.s.top.add(t.key)
	}
	if t.units > 0 && t.s.table != nil {
		t.s.table.add(t.key, t.units, t.at)
	}
}

// mark names a line of a log and its time stamp.
type mark struct {
	file string
	line int64
	at   int64
}

// record takes the next line of the logs, a request of r.cur's log. With
// MaxAhead, a line more than MaxAhead ahead of the clock, and the first
// line, wait for the line after them (see Options.MaxAhead).
func (r *Replayer) record(rec *Record) {
	bound := int64(r.o.MaxAhead)
	if bound <= 0 {
		r.take(rec, r.cur.name)
		return
	}
	if a := r.ahead; a != nil {
		r.ahead = nil
		if a.Time-rec.Time > bound { // ahead of the line after it too
			at := r.now
			if !r.started {
				at = rec.Time
			}
			r.outliers++
			if r.outliers == 1 {
				r.firstOutlier = mark{r.aheadFile, a.line, a.Time}
			}
			a.Time = at
		}
		r.take(a, r.aheadFile)
	}
	if !r.started || rec.Time-r.now > bound {
		r.ahead, r.aheadFile = rec.clone(), r.cur.name
		return
	}
	r.take(rec, r.cur.name)
}

// take decides one request of the log file at its time stamp: the clock
// moves to it, never backwards (a request earlier than the clock, from
// another log or another worker's lines, is decided at the clock's time).
func (r *Replayer) take(rec *Record, file string) {
	t := rec.Time
	if !r.started {
		r.started, r.now, r.min, r.max = true, t, t, t
		r.clock.Set(time.Unix(0, t))
		r.setter = mark{file, rec.line, t}
	}
	switch {
	case t > r.now:
		if len(r.pending) > 0 {
			r.due(t)
		}
		r.clock.Advance(time.Duration(t - r.now))
		r.now = t
		r.setter = mark{file, rec.line, t}
	case t < r.now:
		r.late++
		if r.now-t > r.maxLate {
			r.maxLate, r.farthest = r.now-t, r.setter
		}
	}
	r.min, r.max = min(r.min, t), max(r.max, t)
	r.decide(rec, nil)
}

// decide runs the flow for rec (again, for w, a request held by its rule's
// wait) and counts what became of it, unless its rule's wait holds it.
func (r *Replayer) decide(rec *Record, w *waiter) {
	r.events = r.events[:0]
	d := &r.d
	if err := r.flow.DecideTo(r.ctx, d, rec, rec.Method, core.Path(rec.Path), ""); err != nil {
		panic(err) // the key functions above return no error
	}
	if d.Deferred() {
		r.lim.Complete(r.ctx, d, rec.Status)
	}
	if !d.Allowed && r.rules.waits != nil && r.hold(rec, w) {
		return
	}
	if w != nil {
		if r.queued[w.key]--; r.queued[w.key] <= 0 {
			delete(r.queued, w.key)
		}
	}
	r.commit(rec, w != nil && d.Allowed)
	r.decided++
}

// commit counts the current request's events into each rule's figures.
func (r *Replayer) commit(rec *Record, waited bool) {
	d := &r.d
	for i := range r.events {
		e := &r.events[i]
		switch e.Outcome {
		case core.OutcomeExempt:
			r.exempt++
			continue
		case core.OutcomeBanned:
			r.banned++
			continue
		}
		if e.Rule == "" || strings.IndexByte(e.Rule, '!') >= 0 {
			continue // a penalty's own counters
		}
		s := r.statsFor(e.Rule, e.Plan)
		s.requests++
		units, refused := e.Cost, false
		switch e.Outcome {
		case core.OutcomeBypassed:
			s.bypassed++
			continue
		case core.OutcomeStoreError:
			continue
		case core.OutcomeDenied, core.OutcomeShadowDenied, core.OutcomePenalized, core.OutcomeConcurrencyDenied:
			s.refused++
			if e.Outcome == core.OutcomePenalized {
				s.penalized++
			}
			refused = true
			if units == 0 {
				units = r.weight(rec, e.Rule)
			}
			if s.byOutcome && !s.rule.Counts(rec.Status) {
				units = 0
			}
		default: // allowed (counted, or, under a rule counting by outcome, with Cost 0 when the status does not count), waited, overshoot
			if units == 0 && (!e.Allowed || e.Outcome == core.OutcomeOvershoot) {
				// Admitted by this rule but refused by another (nothing
				// counted), or served over a limit counted by outcome:
				// the demand is what the rule would have charged.
				units = r.weight(rec, e.Rule)
				if s.byOutcome && !s.rule.Counts(rec.Status) {
					units = 0
				}
			}
			if waited && d.Rule != nil && d.Rule.Name == e.Rule {
				s.waited++
			}
		}
		if refused || units > 0 && s.table != nil {
			r.cur.tallies = append(r.cur.tallies, tally{s: s, key: e.Key, units: units, at: rec.Time, refused: refused})
		}
	}
}

// weight is what the rule named would charge rec: the decision's cost
// when the decision names the rule; 1 under a rule without weights; else
// the cost core.Config.MatchRules gives the request under it (its path's
// weight).
func (r *Replayer) weight(rec *Record, rule string) int64 {
	if d := &r.d; d.Rule != nil && d.Rule.Name == rule && d.Cost > 0 {
		return d.Cost
	}
	if !r.rules.weighted[rule] {
		return 1
	}
	rules, costs := r.rules.run.MatchRules(rec.Method, core.Path(rec.Path), r.o.FoldCase)
	for i, m := range rules {
		if m.Name == rule && costs[i] > 0 {
			return costs[i]
		}
	}
	return 1
}

// statKey names the figures of a rule under a plan.
type statKey struct{ rule, plan string }

// ruleStats are one rule's figures under one plan.
type ruleStats struct {
	name, plan string
	rule       *core.Rule
	byOutcome  bool

	requests, refused, penalized, waited, bypassed int64

	top   *topK
	table *keyTable // nil for a rule without limits (concurrent alone)
}

func (r *Replayer) statsFor(name, plan string) *ruleStats {
	if r.lastS != nil && r.lastK.rule == name && r.lastK.plan == plan {
		return r.lastS
	}
	k := statKey{name, plan}
	s := r.stats[k]
	if s == nil {
		cfg := r.rules.run
		rule := cfg.Rule(name)
		if plan != "" {
			if v := cfg.PlanRule(plan, name); v != nil {
				rule = v
			}
		}
		k = statKey{strings.Clone(name), strings.Clone(plan)}
		s = &ruleStats{name: k.rule, plan: k.plan, rule: rule, top: newTopK(topCandidates)}
		if rule != nil {
			s.byOutcome = rule.Count() != "all"
			if p := rule.Policy; p != nil && len(p.Limits) > 0 {
				ws := make([]window, len(p.Limits))
				for i, l := range p.Limits {
					ws[i] = window{period: int64(l.Period)}
					if p.Calendar() {
						ws[i].policy, ws[i].limit = p, i
					}
				}
				s.table = newKeyTable(ws, r.o.StatsKeys)
			}
		}
		r.stats[k] = s
		r.order = append(r.order, s)
	}
	r.lastK, r.lastS = k, s
	return s
}

// The waits of rules with a wait (core.RuleSpec.Wait) are replayed on the
// log's clock, since a limiter on a manual clock would hold the replay
// until the clock moved. The limiter decides under the configuration
// without waits; a request its rule refuses with a Retry-After within the
// rule's wait is held, as the service holds it: it asks again once the
// Retry-After has passed on the log's clock, before any later request of
// the log, and is admitted (counted as waited) or, when the next
// Retry-After would take it past the wait, refused. Held requests of one
// key ask in the order they came, at most wait_queue of them (and 10,000
// in all); past that a request is refused at once.

// waitKey names the queue of a rule and key.
type waitKey struct{ rule, key string }

// waiter is a held request.
type waiter struct {
	rec      *Record // a copy, owning its strings
	key      waitKey
	deadline int64 // when its wait ends
	due      int64 // when it asks again
	seq      int64 // the order it asks in, among those due at once
}

type waitHeap []*waiter

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	return h[i].due < h[j].due || h[i].due == h[j].due && h[i].seq < h[j].seq
}
func (h waitHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)   { *h = append(*h, x.(*waiter)) }
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return w
}

// hold holds the request just refused, when its rule's wait would (see
// above), and reports whether it did.
func (r *Replayer) hold(rec *Record, w *waiter) bool {
	d := &r.d
	if d.Rule == nil || d.Banned || d.Penalty || d.ConcurrencyDenied || d.Err != nil {
		return false
	}
	wr, ok := r.rules.waits[d.Rule.Name]
	if !ok {
		return false
	}
	retry := int64(max(d.Result.RetryAfter, 1))
	if w == nil {
		k := waitKey{d.Rule.Name, d.Key}
		if retry > int64(wr.wait) || r.queued[k] >= wr.queue || len(r.pending) >= maxHeld {
			return false
		}
		k.key = strings.Clone(k.key)
		w = &waiter{rec: rec.clone(), key: k, deadline: r.now + int64(wr.wait)}
		r.queued[k]++
		r.held++
	} else if r.now+retry > w.deadline {
		return false
	}
	w.due, w.seq = r.now+retry, r.seq
	r.seq++
	heap.Push(&r.pending, w)
	return true
}

// due decides again, in order, the held requests due by t, moving the
// clock to each one's time.
func (r *Replayer) due(t int64) {
	for len(r.pending) > 0 && r.pending[0].due <= t {
		w := heap.Pop(&r.pending).(*waiter)
		if w.due > r.now {
			r.clock.Advance(time.Duration(w.due - r.now))
			r.now = w.due
		}
		r.decide(w.rec, w)
	}
}

// nopCloser is an io.ReadCloser of a reader that needs no closing
// (standard input).
type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

// Stdin is a Source of r (standard input), named "-".
func Stdin(r io.Reader) Source {
	return Source{Name: "-", Open: func() (io.ReadCloser, error) { return nopCloser{r}, nil }}
}
