package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// replyError is an error reply from Redis, as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

// TestCounts: which errors count against a node. The values are those
// go-redis v9.23.0 was seen to return (a probe against a real
// redis-server): a wait for a pooled connection ends with the context's
// DeadlineExceeded (or ErrPoolTimeout past PoolTimeout), and so do a dial
// refused or hanging, retried in the background past the deadline, and a
// retry back-off; a read that times out on a connection is a *net.OpError
// (or, on a connection being set up, a bare os.ErrDeadlineExceeded); a
// refused dial that go-redis reports is a *net.OpError. Every timeout
// counts only when the node answered no other call meanwhile: a healthy
// node behind a saturated pool answers others, and its callers that reach
// a connection with little of their time left time out reading.
func TestCounts(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	// A dial bounded by the context: errors.Is(err, DeadlineExceeded)
	// holds, yet the node was asked and did not answer.
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("i/o timeout: %w", context.DeadlineExceeded)}
	fault := []error{
		refused, reset,
		io.EOF, io.ErrUnexpectedEOF, fmt.Errorf("reading reply: %w", io.EOF),
		replyError("LOADING Redis is loading the dataset in memory"),
		replyError("CLUSTERDOWN The cluster is down"),
		replyError("READONLY You can't write against a read only replica."),
		replyError("MASTERDOWN Link with MASTER is down"),
		replyError("ERR Error running script"),
		errors.New("an error the store does not know"),
	}
	wait := []error{
		context.DeadlineExceeded, context.Canceled,
		redis.ErrPoolTimeout, redis.ErrPoolExhausted,
		fmt.Errorf("%w after %v", errTimeout, time.Second),
		fmt.Errorf("wrapped: %w", context.DeadlineExceeded),
		readTimeout, dialTimeout, os.ErrDeadlineExceeded,
	}
	for _, err := range fault {
		for _, answered := range []bool{false, true} {
			if !counts(err, answered) {
				t.Errorf("counts(%#v, answered %v) = false, want true: the node failed", err, answered)
			}
		}
	}
	for _, err := range wait {
		if !counts(err, false) {
			t.Errorf("counts(%#v) with the node silent = false, want true", err)
		}
		if counts(err, true) {
			t.Errorf("counts(%#v) with the node answering others = true, want false: the call only waited", err)
		}
	}
}

// slowConn is a connection to a Redis some way off: every read waits
// a few milliseconds first.
type slowConn struct{ net.Conn }

func (c slowConn) Read(b []byte) (int, error) {
	time.Sleep(10 * time.Millisecond)
	return c.Conn.Read(b)
}

// TestFaultPoolWait: a healthy Redis 10 ms away behind a pool of one
// connection, 256 callers. Calls time out waiting for the connection
// (go-redis's PoolTimeout, 1 s) and fail; but the node answered others
// meanwhile (one every 10 ms, a hundred within the wait, so that a loaded
// machine's stalls, which reached 300 ms in CI, do not make it look
// silent), so its circuit stays closed: no call fails fast with
// ErrCircuitOpen and the breaker holds no failure. The store's own
// timeout (3 s) stays out of the way: when it ends a call in the middle of
// its reply, go-redis closes the connection, and a pool of one that is
// being dialed again answers no one for a while (seen: 2.5 s), which is
// silence.
func TestFaultPoolWait(t *testing.T) {
	srv := redistest.StartServer(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, PoolSize: 1, PoolTimeout: time.Second,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := new(net.Dialer).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return slowConn{c}, nil
		}})
	t.Cleanup(func() { _ = rc.Close() })
	// A long cool-down: once open, the circuit stays open to the end.
	// Batching off: batches would carry the flood over the one connection
	// without a wait, and this test is about calls that wait for it.
	st, err := New(rc, WithTimeout(3*time.Second), WithBreaker(DefaultBreakerFails, time.Minute), WithDenyCache(false), WithBatch(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := testPolicy(t, "pool", "1000000/hour")
	// The pool's one connection is dialled first: a flood on a client
	// that has no connection yet waits for the dial, which the node has
	// answered no one meanwhile (see the README).
	if _, err := st.Take(context.Background(), "warm", p, 1); err != nil {
		t.Fatal(err)
	}
	var (
		wg                     sync.WaitGroup
		ok, waits, open, other atomic.Int64
		firstOther             atomic.Pointer[error]
	)
	end := time.Now().Add(4500 * time.Millisecond)
	for g := range 256 {
		wg.Go(func() {
			key := "user" + strconv.Itoa(g)
			for time.Now().Before(end) {
				_, err := st.Take(context.Background(), key, p, 1)
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, ErrCircuitOpen):
					open.Add(1)
				case errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout):
					waits.Add(1)
				default:
					other.Add(1)
					firstOther.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d answered, %d timed out waiting, %d failed fast, %d other errors", ok.Load(), waits.Load(), open.Load(), other.Load())
	if ok.Load() == 0 || waits.Load() == 0 {
		t.Fatalf("%d answered, %d timed out waiting; the test needs both", ok.Load(), waits.Load())
	}
	if open.Load() != 0 || st.nodes.single.br.open(st.clock.Now()) {
		t.Fatalf("Redis healthy, only the pool too small: %d calls failed fast with ErrCircuitOpen (circuit open: %v); want the circuit closed",
			open.Load(), st.nodes.single.br.open(st.clock.Now()))
	}
	if other.Load() != 0 {
		t.Fatalf("%d errors other than a wait for the pool, the first %v", other.Load(), *firstOther.Load())
	}
	if st.nodes.single.br.tripped() {
		t.Fatalf("breaker holds %d failures after waits alone", st.nodes.single.br.failures.Load())
	}
}

// TestFaultDialHangs: a node whose dials hang (a host that drops the
// connection attempts) answers no one. go-redis dials in the background
// and its callers see only context.DeadlineExceeded at the timeout, the
// same error as a wait for a busy pool; with no other call answered
// meanwhile, those count, and the circuit opens after the threshold.
func TestFaultDialHangs(t *testing.T) {
	release := make(chan struct{})
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: time.Minute,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			select {
			case <-ctx.Done():
			case <-release:
			}
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}})
	t.Cleanup(func() { close(release); _ = rc.Close() })
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	st, err := New(rc, WithTimeout(50*time.Millisecond), WithBreaker(3, time.Second), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := testPolicy(t, "hang", "10/second")
	for i := range 3 {
		if _, err := st.Take(context.Background(), "u", p, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call %d to a node whose dial hangs: %v, want context.DeadlineExceeded", i, err)
		}
	}
	if _, err := st.Take(context.Background(), "u", p, 1); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("after 3 calls that the node answered no one: %v, want ErrCircuitOpen", err)
	}
}
