package main

import (
	"testing"
	"time"

	"github.com/rlkit/rlkit/examples/internal/demo"
	"github.com/rlkit/rlkit/examples/internal/demotest"
)

func TestDemo(t *testing.T) { demotest.Run(t, run) }

func TestLimits(t *testing.T) { demotest.Limits(t, run) }

// TestNewAppLimits checks how newApp maps the limits onto fasthttp,
// WriteTimeout included, which TestLimits cannot tell from the others.
func TestNewAppLimits(t *testing.T) {
	ln := &demo.Listener{Limits: demo.ServerLimits{
		ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 7 * time.Second, WriteTimeout: 11 * time.Second,
		IdleTimeout: 13 * time.Second, MaxHeaderBytes: 17 << 10, MaxConns: 19,
	}}
	srv := newApp(ln).Server()
	if srv.ReadTimeout != 2*time.Second || srv.WriteTimeout != 11*time.Second || srv.IdleTimeout != 13*time.Second || srv.ReadBufferSize != 17<<10 {
		t.Errorf("fasthttp ReadTimeout %v, WriteTimeout %v, IdleTimeout %v, ReadBufferSize %d; want 2s, 11s, 13s, %d",
			srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.ReadBufferSize, 17<<10)
	}
	if srv.HeaderReceived == nil {
		t.Fatal("no HeaderReceived: a body would get only what is left of the header timeout")
	}
	if got := srv.HeaderReceived(nil).ReadTimeout; got != 5*time.Second {
		t.Errorf("body read timeout %v, want 5s (7s - 2s)", got)
	}
	if srv.ConnState == nil {
		t.Error("no ConnState: connections would stay busy after their response")
	}
}
