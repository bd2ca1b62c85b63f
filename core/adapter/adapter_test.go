package adapter_test

import (
	"testing"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/memstore"
)

func TestLimiter(t *testing.T) {
	cfg, err := core.ParseConfig([]byte("rate_limit:\n  enabled: true\n  default: \"1/minute\"\n"), "limits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	given := core.NewLimiter(cfg, core.WithStore(st))
	if got := adapter.Limiter(given); got != given {
		t.Errorf("Limiter(a *core.Limiter) = %p, want the limiter itself (%p)", got, given)
	}
	fromCfg := adapter.Limiter(cfg)
	if fromCfg.Config() != cfg {
		t.Errorf("Limiter(a *core.Config): configuration %p, want %p", fromCfg.Config(), cfg)
	}
	if _, ok := fromCfg.Store().(*memstore.Store); !ok {
		t.Errorf("Limiter(a *core.Config): store %T, want a *memstore.Store", fromCfg.Store())
	}
	if fromCfg.Store() == st || adapter.Limiter(cfg).Store() == fromCfg.Store() {
		t.Errorf("Limiter(a *core.Config): each middleware must count in a memory store of its own")
	}
	for name, limits := range map[string]core.Limits{"nil": nil, "nil *Config": (*core.Config)(nil), "nil *Limiter": (*core.Limiter)(nil)} {
		l := adapter.Limiter(limits)
		if l == nil || l.Config().Enabled() {
			t.Errorf("Limiter(%s) = %v, want a limiter that passes every request", name, l)
			continue
		}
		if d := l.Decide(t.Context(), "GET", "/", "alice", false); !d.Allowed || d.Rule != nil {
			t.Errorf("Limiter(%s): decision %+v, want allowed and counted under no rule", name, d)
		}
	}
}
