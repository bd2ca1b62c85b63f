package redisstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/internal/redistest"
)

// logRecord is one line of a JSON slog handler.
type logRecord struct {
	Level string   `json:"level"`
	Msg   string   `json:"msg"`
	Nodes []string `json:"nodes"`
	Docs  string   `json:"docs"`
	Error string   `json:"error"`
}

// logged returns a logger at debug level and the records it has written.
func logged(t *testing.T) (*slog.Logger, func() []logRecord) {
	var buf syncBuffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return l, func() []logRecord {
		t.Helper()
		var out []logRecord
		for line := range strings.Lines(buf.String()) {
			var r logRecord
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			out = append(out, r)
		}
		return out
	}
}

const coverageSection = "Cluster full coverage"

// TestClusterCoverageWarning: on a Cluster with Redis's default,
// cluster-require-full-coverage yes, New logs exactly one warning naming
// every node and the section of docs/redis.md; with no on every node it
// logs nothing. Both with a client that honours context deadlines and with
// one that does not.
func TestClusterCoverageWarning(t *testing.T) {
	c := redistest.StartCluster(t)
	want := slices.Sorted(slices.Values(c.Addrs()))
	for _, bounded := range []bool{true, false} {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: bounded})
		t.Cleanup(func() { _ = cc.Close() })
		log, records := logged(t)
		newStore(t, cc, redisstore.WithLogger(log))
		got := records()
		if len(got) != 1 {
			t.Fatalf("bounded %v: %d log records %+v, want 1 warning", bounded, len(got), got)
		}
		r := got[0]
		if r.Level != "WARN" || !strings.Contains(r.Msg, `"`+coverageSection+`" in docs/redis.md`) ||
			!strings.Contains(r.Msg, "CONFIG SET cluster-require-full-coverage no") || !slices.Equal(r.Nodes, want) ||
			r.Docs != "docs/redis.md#cluster-full-coverage" {
			t.Fatalf("bounded %v: logged %+v; want a warning naming %q and nodes %v", bounded, r, coverageSection, want)
		}
	}

	for _, n := range c.Nodes() {
		if err := n.Client(t).ConfigSet(context.Background(), "cluster-require-full-coverage", "no").Err(); err != nil {
			t.Fatal(err)
		}
	}
	log, records := logged(t)
	newStore(t, clusterClient(t, c), redisstore.WithLogger(log))
	if got := records(); len(got) != 0 {
		t.Fatalf("with cluster-require-full-coverage no on every node: logged %+v, want nothing", got)
	}

	// One node left at yes is named alone.
	if err := c.Nodes()[1].Client(t).ConfigSet(context.Background(), "cluster-require-full-coverage", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	log, records = logged(t)
	newStore(t, clusterClient(t, c), redisstore.WithLogger(log))
	if got := records(); len(got) != 1 || got[0].Level != "WARN" || !slices.Equal(got[0].Nodes, []string{c.Nodes()[1].Addr()}) {
		t.Fatalf("one node at yes: logged %+v, want one warning naming %s", got, c.Nodes()[1].Addr())
	}
}

// TestClusterCoverageRefused: a Cluster that refuses CONFIG to the
// store's user (as managed services do) gets no warning, only a debug
// record with the refusal.
func TestClusterCoverageRefused(t *testing.T) {
	c := redistest.StartCluster(t)
	for _, n := range c.Nodes() {
		if err := n.Client(t).Do(context.Background(), "ACL", "SETUSER", "limiter", "on", ">limiter-secret", "~*", "&*", "+@all", "-config").Err(); err != nil {
			t.Fatal(err)
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Username: "limiter", Password: "limiter-secret", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	log, records := logged(t)
	newStore(t, cc, redisstore.WithLogger(log))
	got := records()
	if len(got) != 1 || got[0].Level != "DEBUG" || !strings.Contains(got[0].Error, "NOPERM") {
		t.Fatalf("CONFIG refused: logged %+v, want one debug record with the NOPERM refusal", got)
	}
}

// TestClusterCoverageUnreachable: a Cluster that does not answer delays New
// by the check's bound (a second) at most, and New succeeds, with no
// warning.
func TestClusterCoverageUnreachable(t *testing.T) {
	// A listener that accepts and never answers: the check waits for its
	// whole bound.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 64)
	t.Cleanup(func() {
		_ = ln.Close()
		for len(conns) > 0 {
			_ = (<-conns).Close()
		}
	})
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case conns <- conn:
			default:
				_ = conn.Close()
			}
		}
	}()
	for _, bounded := range []bool{true, false} {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{ln.Addr().String()}, ContextTimeoutEnabled: bounded,
			ReadTimeout: 2 * time.Second, MaxRetries: -1})
		t.Cleanup(func() { _ = cc.Close() })
		log, records := logged(t)
		begin := time.Now()
		s, err := redisstore.New(cc, redisstore.WithLogger(log))
		took := time.Since(begin)
		if err != nil {
			t.Fatal(err)
		}
		if took < time.Second || took > 2500*time.Millisecond {
			t.Errorf("bounded %v: New took %v, want the check's bound, 1s", bounded, took)
		}
		if got := records(); len(got) != 1 || got[0].Level != "DEBUG" {
			t.Errorf("bounded %v: logged %+v, want one debug record", bounded, got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// countHook counts the commands a client sends.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestNoCoverageCheckStandalone: a store over a standalone client, or over
// a ClusterClient whose slots the program gives (ClusterSlots, servers that
// need not be in cluster mode), checks nothing: New sends no command and
// logs nothing.
func TestNoCoverageCheckStandalone(t *testing.T) {
	c, _ := redistest.Standalone(t)
	h := &countHook{}
	c.AddHook(h)
	log, records := logged(t)
	newStore(t, c, redisstore.WithLogger(log))
	if n := h.n.Load(); n != 0 {
		t.Errorf("New sent %d commands to a standalone server, want 0", n)
	}

	srv := redistest.StartServer(t)
	var slotCalls atomic.Int64
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			slotCalls.Add(1)
			return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: srv.Addr()}}}}, nil
		},
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = cc.Close() })
	cc.OnNewNode(func(n *redis.Client) { n.AddHook(h) })
	newStore(t, cc, redisstore.WithLogger(log))
	if n, s := h.n.Load(), slotCalls.Load(); n != 0 || s != 0 {
		t.Errorf("New sent %d commands and loaded the slots %d times for a ClusterSlots client, want none", n, s)
	}
	if got := records(); len(got) != 0 {
		t.Errorf("logged %+v, want nothing", got)
	}
}

// TestCoverageSectionInDocs: the section the warning names is a heading of
// docs/redis.md, with the command that fixes the setting.
func TestCoverageSectionInDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/redis.md")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(doc, []byte("\n### "+coverageSection+"\n"))
	if i < 0 {
		t.Fatalf("docs/redis.md has no heading %q", "### "+coverageSection)
	}
	section, _, _ := strings.Cut(string(doc[i+1:]), "\n## ")
	section, _, _ = strings.Cut(section[4:], "\n### ")
	for _, want := range []string{"CONFIG SET cluster-require-full-coverage no", "cluster-require-full-coverage no\n"} {
		if !strings.Contains(section, want) {
			t.Errorf("section %q lacks %q", coverageSection, want)
		}
	}
}
