package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/examples/internal/demo"
)

// TestDemo runs the example as the README does: the unpaced client is
// refused past 5 calls with RetryInfo and metadata, the client paced by
// the server's metadata is never refused, and the third chat stream is.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if err := run(ctx, nil, &out, &errb); err != nil {
		t.Fatalf("run: %v\n%s%s", err, out.String(), errb.String())
	}
	for _, want := range []string{
		`team-a, unpaced: ResourceExhausted "Rate limit exceeded for 'hello' requests"; RetryInfo `,
		`ratelimit ["\"hello\";r=0;t=1"], retry-after ["1"]`,
		"team-b, paced by the server's metadata: 12 OK, 0 ResourceExhausted",
		"unpaced client: 5 OK, 3 ResourceExhausted; paced client: 12 OK, 0 ResourceExhausted in ",
		"chat: 2 streams opened, 1 refused",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestPacedClientTakesItsTime: 12 calls at 5 a second (fixed windows)
// need at least two window changes after the first call.
func TestPacedClientTakesItsTime(t *testing.T) {
	srv, ln, err := startServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	r, err := runDemo(ctx, ln.Addr().String(), &out)
	if err != nil {
		t.Fatal(err)
	}
	if r.pacedOK != 12 || r.pacedRefused != 0 {
		t.Errorf("paced: %d OK, %d refused; want 12, 0", r.pacedOK, r.pacedRefused)
	}
	if r.pacedTime < time.Second {
		t.Errorf("12 paced calls took %v; at 5 a second in fixed windows they need over 1 s", r.pacedTime)
	}
}

// TestFlags rejects arguments with the usage.
func TestFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"extra"}, &out, &errb); err != demo.ErrUsage {
		t.Fatalf("err %v, want ErrUsage", err)
	}
	if !strings.Contains(errb.String(), "-serve") {
		t.Errorf("no usage in %q", errb.String())
	}
}
