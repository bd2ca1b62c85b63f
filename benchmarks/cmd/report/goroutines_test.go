package main

import (
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sweepOutput is three runs of BenchmarkRedisGoroutines at 1 and 64
// goroutines (the metrics in go test's order, sorted by unit), and a
// metric of another benchmark that is not the sweep's.
func sweepOutput() string {
	var b strings.Builder
	for _, run := range []struct{ batched, gcra, unbatched, ulule, rate [2]float64 }{
		{[2]float64{14000, 70000}, [2]float64{8000, 40000}, [2]float64{13000, 16000}, [2]float64{14500, 19000}, [2]float64{11000, 15000}},
		{[2]float64{15000, 80000}, [2]float64{9000, 45000}, [2]float64{12000, 17000}, [2]float64{14000, 20000}, [2]float64{12000, 16000}},
		{[2]float64{13000, 60000}, [2]float64{7000, 30000}, [2]float64{11000, 18000}, [2]float64{15000, 21000}, [2]float64{13000, 17000}},
	} {
		fmt.Fprintf(&b, "BenchmarkRedisGoroutines-2   \t       1\t8144513219 ns/op\t"+
			"%.0f redis_rate-gcra:g1:dec/s\t %.0f redis_rate-gcra:g64:dec/s\t"+
			"%.0f rlkit-batched-fixed_window:g1:dec/s\t %.0f rlkit-batched-fixed_window:g64:dec/s\t"+
			"%.0f rlkit-batched-gcra:g1:dec/s\t %.0f rlkit-batched-gcra:g64:dec/s\t"+
			"%.0f rlkit-unbatched-fixed_window:g1:dec/s\t %.0f rlkit-unbatched-fixed_window:g64:dec/s\t"+
			"%.0f ulule-fixed_window:g1:dec/s\t %.0f ulule-fixed_window:g64:dec/s\t75333040 B/op\t 1896717 allocs/op\n",
			run.rate[0], run.rate[1], run.batched[0], run.batched[1], run.gcra[0], run.gcra[1],
			run.unbatched[0], run.unbatched[1], run.ulule[0], run.ulule[1])
	}
	b.WriteString("BenchmarkRedis/rlkit/gcra/par64-2 \t 1000 \t 20000 ns/op\t 5 other:g8:dec/s\n")
	return b.String()
}

func TestSweep(t *testing.T) {
	r := newResults()
	if err := r.parse(strings.NewReader(sweepOutput())); err != nil {
		t.Fatal(err)
	}
	sw := r.sweep()
	want := "rlkit-batched-fixed_window rlkit-batched-gcra rlkit-unbatched-fixed_window ulule-fixed_window redis_rate-gcra"
	if got := strings.Join(sw.participants, " "); got != want {
		t.Errorf("participants %q, want %q (sweepLabels' order)", got, want)
	}
	if fmt.Sprint(sw.goroutines) != "[1 64]" {
		t.Errorf("goroutines %v, want [1 64]", sw.goroutines)
	}
	if st := sw.rates["rlkit-batched-fixed_window"][64]; st.n != 3 || st.median != 70000 || st.min != 60000 || st.max != 80000 {
		t.Errorf("rlkit batched at 64: %+v, want median 70000 over 60000–80000", st)
	}

	var b strings.Builder
	renderSweep(&b, sw, "redis-goroutines.png", map[string]string{"github.com/ulule/limiter/v3": "v3.11.2"})
	out := b.String()
	wantIn(t, "sweep section", out,
		"## Redis: decisions per second against goroutines",
		"![decisions per second against goroutines](redis-goroutines.png)",
		"| participant | 1 | 64 |",
		"| rlkit redisstore, batched (default), fixed window | 14k<br>13k–15k | 70k<br>60k–80k |",
		"| ulule/limiter, Redis store (fixed window) v3.11.2 | 14.5k<br>14k–15k | 20k<br>19k–21k |",
		"median and min–max over 3 runs",
		// 64 goroutines: 20k ÷ 70k = 0.29 of ulule's time per decision,
		// ranges apart; 16k ÷ 40k = 0.4 of redis_rate's.
		"| 64 | rlkit redisstore, batched (default), fixed window | ulule/limiter, Redis store (fixed window) v3.11.2 | 0.29× | rlkit faster |",
		"| 64 | rlkit redisstore, batched (default), GCRA | go-redis/redis_rate (GCRA) | 0.40× | rlkit faster |",
		// One goroutine: ranges overlap.
		"| 1 | rlkit redisstore, batched (default), fixed window | ulule/limiter, Redis store (fixed window) v3.11.2 | 1.04× | overlap |",
		"| 1 | rlkit redisstore, batched (default), GCRA | go-redis/redis_rate (GCRA) | 1.50× | rlkit slower |",
	)

	png := filepath.Join(t.TempDir(), "g.png")
	if err := writeSweepPNG(png, sw, nil); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(png)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := pngDecodeConfig(f)
	if err != nil || cfg.Width < 600 || cfg.Height < 300 {
		t.Errorf("picture: %+v, %v; want a PNG of at least 600×300", cfg, err)
	}

	// No sweep: the section says so, and there are no participants.
	sw = newResults().sweep()
	b.Reset()
	renderSweep(&b, sw, "x.png", nil)
	if len(sw.participants) != 0 || !strings.Contains(b.String(), "_No rows: the goroutines sweep did not run") {
		t.Errorf("empty sweep: %+v, %q", sw, b.String())
	}
}

var pngDecodeConfig = png.DecodeConfig
