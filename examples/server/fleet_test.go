package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/internal/redistest"
)

// The fleet: fleetProcs examples/server processes counting in one store,
// one rule of fleetLimit per second (a fixed window), and fleetKeys
// callers, each a token of its own subject (the demo counts a caller under
// its token's "sub"). The first fleetHot callers send far more than the
// limit in every window (2 to 3 times), the others less than it or exactly
// it (a quarter of them 18 to 20, the rest 4 to 8). Every process gets
// requests of every caller in every window, all of them at once, for
// fleetWindows whole windows.
const (
	fleetProcs   = 4
	fleetKeys    = 64
	fleetHot     = 8
	fleetLimit   = 20
	fleetWindow  = time.Second
	fleetWindows = 5
	// Every request is sent within [fleetLead, fleetWindow-fleetTail) of a
	// window (one that could not be sent by then is dropped), so that it
	// is answered within the window it was sent in unless it takes longer
	// than fleetTail.
	fleetLead = 50 * time.Millisecond
	fleetTail = 250 * time.Millisecond
	// fleetConns is the number of requests in flight to one process at
	// most: one client connection each.
	fleetConns = 8
	// In lease mode the fleet's fourth process is killed (SIGKILL)
	// fleetKillAt into window fleetKillWindow.
	fleetKillWindow = 2
	fleetKillAt     = 400 * time.Millisecond
	// fleetUnsureShare bounds the requests whose outcome is unknown
	// (store timeouts answered 503, failures, answers after their
	// window), of all sent: past it, too little would be checked.
	fleetUnsureShare = 0.01
	// fleetHotShare is the least share of the hot callers' windows in
	// which more than the limit is decided.
	fleetHotShare = 0.75
)

// fleetLeaseBlock is the stated bound of lease mode's blocks on the rule:
// B = min(lease_block, capacity/8) with lease_block's default (1000).
const fleetLeaseBlock = fleetLimit / 8

// fleetConfig is the rule file: /api/items at fleetLimit per second in
// fixed windows, failing closed, so that a request the store did not
// decide in time is answered 503 and never passes uncounted. consistency
// is "" (the default, exact) or "lease".
func fleetConfig(consistency string) string {
	c := "rate_limit:\n  enabled: true\n  failure: closed\n"
	if consistency != "" {
		c += "  consistency: " + consistency + "\n"
	}
	return c + fmt.Sprintf(`  rules:
    - name: fleet
      paths: ["/api/items"]
      algorithm: fixed_window
      limit: "%d/second"
`, fleetLimit)
}

// fleetSends is how many requests caller key sends in each window.
func fleetSends(key int) int {
	if key < fleetHot {
		return 2*fleetLimit + key%3*fleetLimit/2 // 40, 50, 60
	}
	if key%4 == 0 {
		return fleetLimit - key/4%3 // 20, 19, 18
	}
	return 4 + key%5 // 4 to 8
}

// fleetJob is one request of the load.
type fleetJob struct {
	at        time.Time // when to send it
	cutoff    time.Time // not sent from then on
	key, proc int
}

// fleetReply is what became of one request sent.
type fleetReply struct {
	key, proc      int
	sent, answered time.Time // answered: when the answer, or the failure, was in
	status         int       // 0 when no answer came (err)
	counted        bool      // the answer carries a RateLimit header
	err            error
}

// fleetRun is one run of the fleet on a store.
type fleetRun struct {
	name  string   // of the callers' subjects: fresh ones per run
	store []string // the server's store flags
	lease bool
}

// TestFaultFleetAdmitsTheLimit runs four examples/server processes on one
// redis-server ("server") and on a 3-master Redis Cluster ("cluster"),
// with 64 callers sending to every process at once for 5 windows of 1s,
// and counts what each caller was admitted in each window, across the
// processes. In exact mode: exactly min(sent, limit). In lease mode
// (consistency: lease): at
// most the limit, a fixed window's blocks admitting nothing beyond it, and
// at least min(sent, limit) less processes × block (4 × min(1000, 20/8) =
// 8), what blocks left unspent in other processes may hold back. The
// lease run SIGKILLs one process 400ms into window 2: the bounds hold in
// that window and the next ones, and every request sent to the dead
// process fails, admitted nowhere.
//
// Which window a request counts in: Redis decides on its own clock, the
// same machine's clock as the test's, at an instant between the request's
// send and its answer; a process deciding from its block does so between
// them too. Windows are aligned on whole seconds of that clock (window =
// floor(time / period)), so a request sent and answered within one window
// was decided in it. Requests are sent only from 50ms after a window
// starts to 250ms before it ends, so that nearly every request is
// answered in the window it was sent in. One that is not (a straddler),
// or whose outcome is unknown (a 503: the rule file fails closed, and
// Redis may have counted a call that timed out; a transport failure, as
// for requests in flight when a process is killed), counts as neither
// admitted nor refused, but as unsure in every window from its send to its
// answer. Per caller and window the check is then
//
//	admitted <= limit
//	admitted >= min(admitted + refused, limit) - unsure - slack
//
// with slack 0 in exact mode, where with no unsure request it reads
// admitted == min(sent, limit). An admitted straddler adds one to the
// windows it spans, which together admit at most limit per window.
// Requests sent to the killed process once it is gone (reaped) are left
// out, and must all fail. The test fails, too, when more than 1% of the
// requests are unsure, or fewer than 75% of the hot callers' windows had
// more than the limit decided: the machine did not carry the load, and
// too little was checked.
func TestFaultFleetAdmitsTheLimit(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		srv := redistest.StartServer(t)
		store := []string{"-redis", "redis://" + srv.Addr() + "/0"}
		t.Run("exact", func(t *testing.T) { fleetCheck(t, fleetRun{"server-exact", store, false}) })
		t.Run("lease", func(t *testing.T) { fleetCheck(t, fleetRun{"server-lease", store, true}) })
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t)
		store := []string{"-redis-cluster", strings.Join(c.Addrs(), ",")}
		t.Run("exact", func(t *testing.T) { fleetCheck(t, fleetRun{"cluster-exact", store, false}) })
		t.Run("lease", func(t *testing.T) { fleetCheck(t, fleetRun{"cluster-lease", store, true}) })
	})
}

func fleetCheck(t *testing.T, run fleetRun) {
	consistency := ""
	if run.lease {
		consistency = "lease"
	}
	cfg := fleetConfig(consistency)
	if _, err := core.ParseConfig([]byte(cfg), "fleet.yaml"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	procs := make([]*serverProcess, fleetProcs)
	for i := range procs {
		procs[i] = startServerProcess(t, 0, append([]string{"-config", file, "-watch=false"}, run.store...)...)
	}
	// All stopped at once: a program built with -race lingers a second
	// at exit.
	t.Cleanup(func() { fleetStop(t, procs) })
	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: fleetConns, MaxConnsPerHost: fleetConns},
		Timeout:   5 * time.Second,
	}
	t.Cleanup(client.CloseIdleConnections)
	auth := make([]string, fleetKeys)
	for k := range auth {
		auth[k] = "Bearer " + token(t, fmt.Sprintf("fleet-%s-%d-%02d", run.name, time.Now().UnixNano(), k), "")
	}
	fleetWarmUp(t, client, procs, auth)

	// The first window starts on the next whole second.
	start := time.Now().Truncate(fleetWindow).Add(fleetWindow)
	jobs := fleetPlan(start)
	victim, died := -1, time.Time{}
	killed := make(chan struct{})
	if run.lease {
		victim = fleetProcs - 1
		go func() {
			defer close(killed)
			at := start.Add(fleetKillWindow*fleetWindow + fleetKillAt)
			time.Sleep(time.Until(at))
			p := procs[victim]
			if err := p.cmd.Process.Kill(); err != nil {
				t.Errorf("SIGKILL: %v", err)
			}
			err := <-p.done
			died = time.Now()
			p.done <- err // for the cleanup's wait
			t.Logf("process %d killed %v into window %d, gone %v later", victim, fleetKillAt, fleetKillWindow, died.Sub(at).Round(time.Millisecond))
		}()
	} else {
		close(killed)
	}
	replies := fleetLoad(client, procs, auth, jobs)
	<-killed
	fleetTally(t, run, start, replies, victim, died, len(jobs))
}

// fleetStop sends SIGTERM to every process and waits until each has
// exited, leaving its exit where startServerProcess's cleanup waits for it.
func fleetStop(t *testing.T, procs []*serverProcess) {
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case err := <-p.done:
			p.done <- err
		case <-time.After(10 * time.Second):
			t.Errorf("%s did not stop within 10s of SIGTERM", p.base)
		}
	}
}

// fleetWarmUp sends a request of every caller to every process, until
// each is counted: the processes have their Redis connections to every
// node and the node their script, so that a cold first call (a dial, a
// script load) does not outlast the store's 100ms timeout in the windows
// counted.
func fleetWarmUp(t *testing.T, client *http.Client, procs []*serverProcess, auth []string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, p := range procs {
		for c := range fleetConns {
			wg.Go(func() {
				for k := c; k < len(auth); k += fleetConns {
					deadline := time.Now().Add(10 * time.Second)
					for {
						r := send(client, p.base+"/api/items", auth[k])
						if r.err == nil && r.counted {
							break
						}
						if time.Now().After(deadline) {
							t.Errorf("%s: caller %d not counted within 10s: status %d, err %v", p.base, k, r.status, r.err)
							return
						}
						time.Sleep(10 * time.Millisecond)
					}
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// fleetPlan lays out every request: caller key's n requests of window w
// are spread evenly over the window's sending span, each caller's shifted
// by a fraction of one interval so that callers do not send together, and
// go to the processes in turn, starting at a process that changes with
// the caller and the window.
func fleetPlan(start time.Time) []fleetJob {
	span := fleetWindow - fleetLead - fleetTail
	var jobs []fleetJob
	for w := range fleetWindows {
		ws := start.Add(time.Duration(w) * fleetWindow)
		for k := range fleetKeys {
			n := fleetSends(k)
			shift := float64(k) / fleetKeys
			for i := range n {
				off := time.Duration((float64(i) + shift) / float64(n) * float64(span))
				jobs = append(jobs, fleetJob{
					at:     ws.Add(fleetLead + off),
					cutoff: ws.Add(fleetWindow - fleetTail),
					key:    k,
					proc:   (i + k + w) % fleetProcs,
				})
			}
		}
	}
	slices.SortFunc(jobs, func(a, b fleetJob) int { return a.at.Compare(b.at) })
	return jobs
}

// fleetLoad sends the jobs, each at its time or as soon after as one of
// its process's fleetConns connections is free, but never from its
// cutoff on, and returns what became of those sent.
func fleetLoad(client *http.Client, procs []*serverProcess, auth []string, jobs []fleetJob) []fleetReply {
	queues := make([]chan fleetJob, len(procs))
	for i := range queues {
		queues[i] = make(chan fleetJob, len(jobs))
	}
	var (
		mu      sync.Mutex
		replies []fleetReply
		wg      sync.WaitGroup
	)
	for p := range procs {
		url := procs[p].base + "/api/items"
		for range fleetConns {
			wg.Go(func() {
				var mine []fleetReply
				for j := range queues[p] {
					if !time.Now().Before(j.cutoff) {
						continue
					}
					r := send(client, url, auth[j.key])
					mine = append(mine, fleetReply{
						key: j.key, proc: j.proc, sent: r.at, answered: r.at.Add(r.took),
						status: r.status, counted: r.counted, err: r.err,
					})
				}
				mu.Lock()
				replies = append(replies, mine...)
				mu.Unlock()
			})
		}
	}
	for _, j := range jobs {
		time.Sleep(time.Until(j.at)) // pacing: when each is sent is measured, not assumed
		queues[j.proc] <- j
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	return replies
}

// fleetCell is what one caller got in one window.
type fleetCell struct {
	admitted, refused int // sent and answered 200 or 429 within the window
	unsure            int // may have been decided in the window, outcome unknown
}

// fleetSpan is the windows [from, to] an admitted straddler may have been
// decided in.
type fleetSpan struct{ key, from, to int }

func fleetTally(t *testing.T, run fleetRun, start time.Time, replies []fleetReply, victim int, died time.Time, planned int) {
	t.Helper()
	window := func(at time.Time) int {
		return int(at.Sub(start) / fleetWindow) // start has no monotonic reading: both are wall clock
	}
	cells := make([][fleetWindows]fleetCell, fleetKeys)
	var (
		spans                          []fleetSpan
		straddlers, refused503, failed int
		dead, deadAnswered             int // sent to the killed process once dead; answered nonetheless
		slowest                        time.Duration
		firstOdd                       string
	)
	for _, r := range replies {
		slowest = max(slowest, r.answered.Sub(r.sent))
		from, to := window(r.sent), window(r.answered)
		if from < 0 || from >= fleetWindows {
			t.Fatalf("a request sent at %v, outside the windows from %v", r.sent, start)
		}
		if r.proc == victim && !r.sent.Before(died) {
			dead++
			if r.err == nil {
				deadAnswered++
			}
			continue
		}
		decided := r.err == nil && (r.status == http.StatusOK || r.status == http.StatusTooManyRequests) && r.counted
		switch {
		case decided && from == window(r.answered):
			if r.status == http.StatusOK {
				cells[r.key][from].admitted++
			} else {
				cells[r.key][from].refused++
			}
			continue
		case decided:
			straddlers++
			if r.status == http.StatusOK {
				spans = append(spans, fleetSpan{r.key, from, to})
			}
		case r.status == http.StatusServiceUnavailable:
			refused503++
		default:
			failed++
			if firstOdd == "" {
				firstOdd = fmt.Sprintf("process %d: status %d, counted %v, err %v", r.proc, r.status, r.counted, r.err)
			}
		}
		for w := from; w <= min(to, fleetWindows-1); w++ {
			cells[r.key][w].unsure++
		}
	}

	// Over the fleet: what was sent and what became of it, per window.
	sent := len(replies)
	unsure := straddlers + refused503 + failed
	t.Logf("%s: %d requests planned, %d sent (%d too late to send), %d to the killed process once dead (%d answered); unsure: %d straddling a window's end, %d answered 503, %d failed (%s); slowest answer %v",
		run.name, planned, sent, planned-sent, dead, deadAnswered, straddlers, refused503, failed, firstOdd, slowest.Round(time.Millisecond))
	for w := range fleetWindows {
		var hotA, hotR, coldA, coldR, u int
		for k := range fleetKeys {
			c := cells[k][w]
			u += c.unsure
			if k < fleetHot {
				hotA, hotR = hotA+c.admitted, hotR+c.refused
			} else {
				coldA, coldR = coldA+c.admitted, coldR+c.refused
			}
		}
		t.Logf("window %d: hot callers %d admitted (%d × %d = %d at most), %d refused; the others %d admitted, %d refused; %d unsure",
			w, hotA, fleetHot, fleetLimit, fleetHot*fleetLimit, hotR, coldA, coldR, u)
	}
	if deadAnswered != 0 {
		t.Errorf("%d requests sent to the killed process after it died were answered; want every one failed", deadAnswered)
	}
	if victim >= 0 && dead == 0 {
		t.Errorf("no request sent to the killed process after it died: the kill came too late to check anything")
	}
	if float64(unsure) > fleetUnsureShare*float64(sent) {
		t.Errorf("%d of %d requests with an unknown outcome, want at most %.0f%%: too few decided to check the counts", unsure, sent, 100*fleetUnsureShare)
	}

	// Per caller and window: the bound, and the refusals it explains.
	slack := 0 // refused with quota left: none in exact mode
	if run.lease {
		slack = fleetProcs * fleetLeaseBlock
	}
	var over, overMax, under, underMax, underHot, underHotMax, hotOver int
	for k := range fleetKeys {
		for w := range fleetWindows {
			c := cells[k][w]
			due := min(c.admitted+c.refused, fleetLimit)
			if c.admitted > fleetLimit {
				over += c.admitted - fleetLimit
				overMax = max(overMax, c.admitted-fleetLimit)
				t.Errorf("caller %d (%d sent per window), window %d: %d admitted (%d refused, %d unsure); want at most the limit, %d",
					k, fleetSends(k), w, c.admitted, c.refused, c.unsure, fleetLimit)
			}
			if n := due - c.admitted; n > 0 {
				under += n
				underMax = max(underMax, n)
				if k < fleetHot {
					underHot += n
					underHotMax = max(underHotMax, n)
				}
			}
			if c.admitted < due-c.unsure-slack {
				t.Errorf("caller %d (%d sent per window), window %d: %d admitted, %d refused, %d unsure; want at least %d: min(admitted + refused, limit %d) - unsure - %d",
					k, fleetSends(k), w, c.admitted, c.refused, c.unsure, due-c.unsure-slack, fleetLimit, slack)
			}
			if k < fleetHot && c.admitted+c.refused > fleetLimit {
				hotOver++
			}
		}
	}
	for _, s := range spans {
		n, within := 0, 0
		for w := s.from; w <= min(s.to, fleetWindows-1); w++ {
			n += cells[s.key][w].admitted
		}
		for _, o := range spans {
			if o.key == s.key && o.from >= s.from && o.to <= s.to {
				within++
			}
		}
		if n+within > fleetLimit*(s.to-s.from+1) {
			t.Errorf("caller %d, windows %d to %d: %d admitted and %d admitted straddling; want at most %d", s.key, s.from, s.to, n, within, fleetLimit*(s.to-s.from+1))
		}
	}
	// A hot caller's window is checked for refusals beyond the limit only
	// when more than the limit was decided in it: a machine too busy to
	// send the load leaves too few such windows.
	if hotOver < fleetHotShare*fleetHot*fleetWindows {
		t.Errorf("%d of %d hot callers' windows had more than the limit (%d) decided, want at least %.0f%%: the load was not sent",
			hotOver, fleetHot*fleetWindows, fleetLimit, 100*fleetHotShare)
	}
	t.Logf("over-admission (admitted beyond the limit): %d in all, at most %d for one caller in one window; under-admission (min(admitted + refused, limit) - admitted): %d in all, at most %d; of hot callers %d in all, at most %d, %d of their %d windows over the limit; allowed: 0 over, %d under (with no unsure request)",
		over, overMax, under, underMax, underHot, underHotMax, hotOver, fleetHot*fleetWindows, slack)
}
