package grpcrl

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc/peer"
)

// TestPeerAddr: each peer's own address, whichever others share its slot
// in the table, and the same text again for the same *net.TCPAddr; other
// kinds of address by their String.
func TestPeerAddr(t *testing.T) {
	addrs := make([]*net.TCPAddr, 2000)
	for i := range addrs {
		addrs[i] = &net.TCPAddr{IP: net.IPv4(10, 0, byte(i>>8), byte(i)), Port: 1000 + i}
	}
	for round := range 2 {
		for _, a := range addrs {
			ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: a})
			if got, want := peerAddr(ctx), a.String(); got != want {
				t.Fatalf("round %d: peerAddr %q, want %q", round, got, want)
			}
		}
	}
	a := addrs[7]
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: a})
	peerAddr(ctx)
	if n := testing.AllocsPerRun(100, func() { peerAddr(ctx) }); n != 0 {
		t.Errorf("peerAddr of a known peer allocates %v times, want 0", n)
	}
	unix := &net.UnixAddr{Name: "/tmp/s", Net: "unix"}
	if got := peerAddr(peer.NewContext(context.Background(), &peer.Peer{Addr: unix})); got != "/tmp/s" {
		t.Errorf("unix peer: %q", got)
	}
	if got := peerAddr(context.Background()); got != "" {
		t.Errorf("no peer: %q, want \"\"", got)
	}
}
