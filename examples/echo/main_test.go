package main

import (
	"testing"

	"github.com/rlkit/rlkit/examples/internal/demotest"
)

func TestDemo(t *testing.T) { demotest.Run(t, run) }

func TestLimits(t *testing.T) { demotest.Limits(t, run) }
