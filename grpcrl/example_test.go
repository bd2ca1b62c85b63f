package grpcrl_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/grpcrl"
	"github.com/rlkit/rlkit/outbound"
)

// A server whose health check is limited to two calls a minute per API
// key, and what a client sees: the rate-limit metadata on every call,
// and ResourceExhausted with a RetryInfo once over the limit.
func ExampleNew() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: check
      paths: ["/grpc.health.v1.Health/Check"]
      limit: "2/minute"
`), "ratelimit.yaml")
	if err != nil {
		panic(err)
	}
	// A clock standing at the start of a minute, so the output is exact.
	store := memstore.New(memstore.WithClock(store.NewManualClock(time.Unix(1_700_000_040, 0))))
	defer store.Close()
	rl := grpcrl.New(
		core.NewLimiter(cfg, core.WithStore(store)),
		grpcrl.WithKeyFunc(grpcrl.MetadataKey("x-api-key")),
	)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(rl.Unary()), grpc.ChainStreamInterceptor(rl.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(ln)
	defer srv.Stop()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-123")
	for range 3 {
		var header metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		st := status.Convert(err)
		fmt.Println(st.Code(), header.Get("ratelimit"), header.Get("retry-after"))
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Println(st.Message(), "- retry in", ri.GetRetryDelay().AsDuration())
			}
		}
	}
	// Output:
	// OK ["check";r=1;t=60] []
	// OK ["check";r=0;t=60] []
	// ResourceExhausted ["check";r=0;t=60] [60]
	// Rate limit exceeded for 'check' requests - retry in 1m0s
}

// A client paced at 100 calls a second per upstream, which also waits
// whenever a server says its own limit is reached (rate-limit metadata,
// retry-after, RetryInfo) instead of being refused.
func ExampleUnaryClientInterceptor() {
	cfg, err := outbound.Rate(100, time.Second, 10) // or core.LoadConfig: rules on full method names
	if err != nil {
		panic(err)
	}
	lim, err := outbound.New(cfg, nil) // nil: an in-memory store; a Redis one shares it between replicas
	if err != nil {
		panic(err)
	}
	conn, err := grpc.NewClient("dns:///api.example.com:443",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(grpcrl.UnaryClientInterceptor(lim)),
		grpc.WithChainStreamInterceptor(grpcrl.StreamClientInterceptor(lim)),
	)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	_ = healthpb.NewHealthClient(conn) // every call on conn waits for its turn
}
