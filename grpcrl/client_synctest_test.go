package grpcrl_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rlkit/rlkit/grpcrl"
	"github.com/rlkit/rlkit/outbound"
)

// TestClientWaitsSynctest: in fake time (testing/synctest), a client
// paced by an outbound.Limiter far above the server's limit (1000 a
// second) against a server of 3 calls a minute (fixed windows, its
// rate-limit metadata on every answer, as grpcrl writes it) sends 3 calls
// at once, waits for the window's reset, sends 3 more exactly then, and
// so on, and is never refused.
func TestClientWaitsSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, err := outbound.Rate(1000, time.Second, 1000)
		if err != nil {
			t.Fatal(err)
		}
		lim, err := outbound.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		var starts []time.Duration
		refused := 0
		// The server: 3 calls per minute from begin.
		window, used := int64(-1), 0
		server := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
			now := time.Since(begin)
			starts = append(starts, now)
			if w := int64(now / time.Minute); w != window {
				window, used = w, 0
			}
			reset := strconv.FormatInt(int64((time.Duration(window+1)*time.Minute-now+time.Second-1)/time.Second), 10)
			var err error
			if used < 3 {
				used++
			} else {
				refused++
				err = status.Error(codes.ResourceExhausted, "over")
			}
			md := metadata.Pairs("ratelimit-policy", `"say";q=3;w=60`, "ratelimit", `"say";r=`+strconv.Itoa(3-used)+";t="+reset)
			if err != nil {
				md.Set("retry-after", reset)
			}
			for _, o := range opts {
				if h, ok := o.(grpc.HeaderCallOption); ok {
					*h.HeaderAddr = md
				}
			}
			return err
		}
		unary := grpcrl.UnaryClientInterceptor(lim, grpcrl.WithCallKey(func(context.Context, string) string { return "upstream" }))
		for i := range 7 {
			if err := unary(context.Background(), sayMethod, nil, nil, nil, server); err != nil {
				t.Fatalf("call %d: %v", i+1, err)
			}
		}
		m := time.Minute
		want := []time.Duration{0, 0, 0, m, m, m, 2 * m}
		if refused != 0 || len(starts) != len(want) {
			t.Fatalf("refused %d, starts %v; want none refused, starts %v", refused, starts, want)
		}
		for i := range want {
			if starts[i] != want[i] {
				t.Errorf("call %d started at +%v, want +%v", i+1, starts[i], want[i])
			}
		}
	})
}
