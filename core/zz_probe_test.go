package core

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestZZProbe(t *testing.T) {
	for _, y := range []string{
		"tiers: {free: ~}",
		"tiers: {free: {}}",
		"tiers: {free: {rules: ~}}",
		"tiers: {free: {rules: {login: ~}}}",
		"tiers: {free: {rules: {login: []}}}",
		"tiers: {free: {rules: {login: ''}}}",
		"tiers: {free: {rules: {login: {burst: 3}}}}",
		"tiers: {free: {rules: {login: {limit: '1/minute', burst: -1}}}}",
		"tiers: {free: {default: []}}",
		"tiers: {free: {default: ~}}",
		"tiers: {'': {}}",
		"tiers: {custom: {}}",
		"tiers: {Custom: {}}",
		"tiers: {free: {}, free: {}}",
		"tiers: []",
		"tiers: ~",
		"tiers: {free: {rules: {default: '1/minute'}}}",
		"tiers: {'pro@x': {}}",
		"tiers: {'a b': {}}",
		"tiers: {free: {rules: {login: '0/minute'}}}",
		"tiers: {free: {rules: {login: '2147483648/second'}}}",
	} {
		src := "rate_limit:\n  enabled: true\n  rules:\n    - name: login\n      paths: [\"/login\"]\n      limit: \"5/minute\"\n  " + y + "\n"
		c, err := ParseConfig([]byte(src), "p.yaml")
		fmt.Printf("%-60q => err=%v ok=%v plans=%v\n", y, err, c != nil, c.Plans())
	}
	for _, n := range []int{1000, 50_000, 100_000} {
		var b strings.Builder
		b.WriteString("rate_limit:\n  enabled: true\n  rules:\n    - name: login\n      paths: [\"/login\"]\n      limit: \"5/minute\"\n  tiers:\n")
		for i := range n / 2 {
			fmt.Fprintf(&b, "    p%d: {rules: {login: \"%d/minute\"}}\n", i, i+1)
		}
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		c, err := ParseConfig([]byte(b.String()), "p.yaml")
		el := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&m1)
		fmt.Printf("variants %d: bytes of yaml %d err=%v time=%v heap retained %d MB total alloc %d MB\n", n, b.Len(), err != nil, el, (int64(m1.HeapAlloc)-int64(m0.HeapAlloc))>>20, (m1.TotalAlloc-m0.TotalAlloc)>>20)
		_ = c
	}
}
