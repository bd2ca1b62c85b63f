package core_test

import (
	"testing"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
)

// TestFailsOpen: the policy WithFailOpen sets wins, else the current
// configuration's (and a nil one passes requests).
func TestFailsOpen(t *testing.T) {
	closed, err := core.NewConfig(core.Spec{Enabled: true, Failure: "closed"})
	if err != nil {
		t.Fatal(err)
	}
	open, err := core.NewConfig(core.Spec{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	defer store.Close()
	for _, tc := range []struct {
		name string
		cfg  *core.Config
		opts []core.Option
		want bool
	}{
		{"nil", nil, nil, true},
		{"closed", closed, nil, false},
		{"open", open, nil, true},
		{"closed, WithFailOpen(true)", closed, []core.Option{core.WithFailOpen(true)}, true},
		{"open, WithFailOpen(false)", open, []core.Option{core.WithFailOpen(false)}, false},
	} {
		l := core.NewLimiter(tc.cfg, append(tc.opts, core.WithStore(store))...)
		if got := l.FailsOpen(); got != tc.want {
			t.Errorf("%s: FailsOpen() = %v, want %v", tc.name, got, tc.want)
		}
	}
	l := core.NewLimiter(open, core.WithStore(store))
	l.SetConfig(closed)
	if l.FailsOpen() {
		t.Errorf("after SetConfig(closed): FailsOpen() = true")
	}
}
