package benchmarks

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"
)

const (
	// overGoroutines goroutines, released together, each make overAttempts
	// decisions on one fresh key per trial: 256 attempts against a quota of
	// 100, so a participant that admits more than 100 over-admits.
	overGoroutines = 64
	overAttempts   = 4
	// overMaxTrials bounds the trials of one row: the HTTP rows take a fresh
	// client IP per trial from 198.18.0.0/15 (the benchmarking range of
	// RFC 2544), which holds 131,072.
	overMaxTrials = 1 << 17
)

// trial is one over-admission trial: it makes one decision as goroutine g
// and reports whether the request was admitted, or an error when the
// limiter failed. Trials get fresh keys, so they never share a counter.
type trial func(g int) (bool, error)

// overAdmission runs b.N trials of overGoroutines goroutines making
// overAttempts decisions each, all on one key, against a quota of 100 per
// hour (hundredAnHour), and reports the fewest and most requests one trial
// admitted (admitted-min, admitted-max) and the most calls that failed in one
// trial (failed-max). newTrial returns trial number i, ready to run.
//
// A trial that spans the start of an hour (when a fixed window may rightly
// admit 100 more) is run again on a new key. For rlkit (strict), any trial
// that admits other than exactly 100, or any failed call, fails the row;
// peers are reported as they are.
func overAdmission(b *testing.B, strict bool, next *int, newTrial func(i int) trial) {
	minAdmitted, maxAdmitted, maxFailed := int64(1<<62), int64(-1), int64(0)
	for range b.N {
		var admitted, failed int64
		for {
			if *next >= overMaxTrials {
				b.Fatalf("out of fresh keys after %d trials (lower -benchtime)", *next)
			}
			decide := newTrial(*next)
			*next++
			start := time.Now()
			admitted, failed = runTrial(decide)
			if start.Truncate(time.Hour).Equal(time.Now().Truncate(time.Hour)) {
				break
			}
		}
		minAdmitted = min(minAdmitted, admitted)
		maxAdmitted = max(maxAdmitted, admitted)
		maxFailed = max(maxFailed, failed)
		if strict && (admitted != hundredAnHour.Count || failed != 0) && !b.Failed() {
			b.Errorf("trial admitted %d of %d requests with %d failed, want exactly %d and none failed",
				admitted, overGoroutines*overAttempts, failed, hundredAnHour.Count)
		}
	}
	b.ReportMetric(float64(minAdmitted), "admitted-min")
	b.ReportMetric(float64(maxAdmitted), "admitted-max")
	b.ReportMetric(float64(maxFailed), "failed-max")
}

// runTrial starts overGoroutines goroutines, releases them together and
// counts what their decisions admitted and how many failed.
func runTrial(decide trial) (admitted, failed int64) {
	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		nAdmitted atomic.Int64
		nFailed   atomic.Int64
	)
	for g := range overGoroutines {
		wg.Go(func() {
			<-start
			for range overAttempts {
				ok, err := decide(g)
				switch {
				case err != nil:
					nFailed.Add(1)
				case ok:
					nAdmitted.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return nAdmitted.Load(), nFailed.Load()
}

// trialIP returns the client IP of HTTP trial i, in 198.18.0.0/15.
func trialIP(i int) net.IP { return net.IPv4(198, 18+byte(i>>16), byte(i>>8), byte(i)) }

// BenchmarkOverAdmission checks every participant for over-admission: per
// trial, 64 goroutines released together make 4 requests each (256) on one
// fresh key, quota 100 per hour; exactly 100 must pass. One op is one
// trial; admitted-min and admitted-max are the fewest and most requests one
// trial admitted, failed-max the most calls that returned an error (a
// failure is not an admission). Rows:
//
//   - memory/<participant>: every limiter of BenchmarkOneKey (keys
//     "over-<trial>"; xtime-rate, which has no keys, gets a new Limiter per
//     trial);
//   - redis/<participant>: every limiter of BenchmarkRedis on the shared
//     redis-server (keys "over-<run>-<trial>");
//   - nethttp/<middleware>, gin/rlkit, echo/<builtin|rlkit>,
//     fiber/<builtin|rlkit>: every middleware of the HTTP and framework
//     benchmarks, serving GET /api/search in process, the client IP new per
//     trial; 200 is admitted, 429 denied, any other status a failure.
//
// rlkit's rows fail unless every trial admits exactly 100 with no failure.
func BenchmarkOverAdmission(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		for _, im := range impls(implSet{keyless: true, variants: true}) {
			var next int
			b.Run(im.name, func(b *testing.B) {
				var shared decideFunc
				if !im.keyless {
					shared = im.build(b, hundredAnHour, nil)
				}
				overAdmission(b, strings.HasPrefix(im.name, "rlkit"), &next, func(i int) trial {
					decide := shared
					if decide == nil {
						decide = im.build(b, hundredAnHour, nil)
					}
					ctx, key := context.Background(), "over-"+strconv.Itoa(i)
					return func(int) (bool, error) { return decide(ctx, key) }
				})
			})
		}
	})

	b.Run("redis", func(b *testing.B) {
		addr := benchRedisAddr(b)
		// Keys of earlier runs on the same server (cmd/report runs the
		// binary several times) live for an hour: new ones per run.
		run := strconv.FormatInt(time.Now().UnixNano(), 36)
		for _, im := range redisImpls {
			var next int
			b.Run(strings.ReplaceAll(im.name, "/", "-"), func(b *testing.B) {
				c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: overGoroutines, ContextTimeoutEnabled: true})
				b.Cleanup(func() { _ = c.Close() })
				decide := im.build(b, c, hundredAnHour)
				overAdmission(b, im.strict, &next, func(i int) trial {
					ctx, key := context.Background(), "over-"+run+"-"+strconv.Itoa(i)
					return func(int) (bool, error) { return decide(ctx, key) }
				})
			})
		}
	})

	httpRows := func(b *testing.B, name string, h http.Handler) {
		var next int
		b.Run(name, func(b *testing.B) {
			overAdmission(b, strings.HasSuffix(name, "rlkit") || strings.HasPrefix(name, "nethttp/rlkit"), &next, func(i int) trial {
				reqs := make([]*http.Request, overGoroutines)
				for g := range reqs {
					reqs[g] = httptest.NewRequest("GET", "/api/search", nil)
					reqs[g].RemoteAddr = net.JoinHostPort(trialIP(i).String(), "1234")
				}
				return func(g int) (bool, error) {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, reqs[g])
					return statusDecision(w.Code)
				}
			})
		})
	}
	for _, im := range httpImpls {
		httpRows(b, "nethttp/"+im.name, im.build(b, hundredAnHour)(jsonHandler))
	}
	for _, fw := range []struct {
		name  string
		impls []frameworkImpl
	}{{"gin", ginImpls}, {"echo", echoImpls}} {
		for _, im := range fw.impls {
			if limits(im.name) {
				httpRows(b, fw.name+"/"+im.name, im.build(b, hundredAnHour))
			}
		}
	}
	for _, im := range fiberImpls {
		if !limits(im.name) {
			continue
		}
		h := im.build(b, hundredAnHour).Handler()
		var next int
		b.Run("fiber/"+im.name, func(b *testing.B) {
			overAdmission(b, im.name == "rlkit", &next, func(i int) trial {
				ctxs := make([]*fasthttp.RequestCtx, overGoroutines)
				for g := range ctxs {
					var req fasthttp.Request
					req.Header.SetMethod("GET")
					req.SetRequestURI("/api/search")
					ctxs[g] = new(fasthttp.RequestCtx)
					ctxs[g].Init(&req, &net.TCPAddr{IP: trialIP(i), Port: 1234}, nil)
				}
				return func(g int) (bool, error) {
					ctxs[g].Response.Reset()
					h(ctxs[g])
					return statusDecision(ctxs[g].Response.StatusCode())
				}
			})
		})
	}
}

// statusDecision reads a response status: 200 admitted, 429 denied,
// anything else a failure.
func statusDecision(code int) (bool, error) {
	switch code {
	case http.StatusOK:
		return true, nil
	case http.StatusTooManyRequests:
		return false, nil
	}
	return false, &statusError{code}
}

type statusError struct{ code int }

func (e *statusError) Error() string {
	return "status " + strconv.Itoa(e.code) + " " + http.StatusText(e.code)
}

// limits reports whether the framework row named name has a limiter: not
// bare, and not a floor row (floor-headers writes headers and limits
// nothing, so it would admit every request).
func limits(name string) bool {
	return name != "bare" && !strings.HasPrefix(name, "floor")
}
