// Package redistest gives tests real Redis servers on loopback, or miniredis
// when redis-server is not installed.
//
// Every helper takes a testing.TB and registers t.Cleanup to stop what it
// started, so a process never outlives its test, even when the test fails or
// panics. On Linux each child also gets SIGKILL if the test binary dies
// (Pdeathsig). Servers listen on 127.0.0.1 only, on ports picked at random
// and verified free; they keep no data on disk (--save "" --appendonly no),
// so data is lost on Kill, Stop and Restart.
//
// Most callers use one of three entry points:
//
//   - Standalone: a client for a real server when one can be started, else a
//     miniredis client. The second result says which ("redis-server" or
//     "miniredis").
//   - StartServer: a real redis-server that a fault test can Kill (SIGKILL),
//     Pause (SIGSTOP) and Resume (SIGCONT), Stop and Restart.
//   - StartCluster: three redis-server masters in cluster mode, all 16384
//     slots assigned. Each of Nodes can be killed and restarted on its
//     own, keeping its cluster identity, so a restarted master rejoins with
//     its slots; WaitFailed waits until the others declare a node failed.
//     RequireFullCoverage(false) sets cluster-require-full-coverage no,
//     under which the other masters keep serving their slots once a
//     master is declared failed (with Redis's default, yes, they refuse
//     every query).
//
// StartServer and StartCluster call Require, which skips the test when
// redis-server or redis-cli is not in PATH. Setting RLKIT_REQUIRE_REDIS=1
// (as CI does) turns every such skip, and the miniredis fallback of
// Standalone, into a test failure, so a CI run cannot pass by testing
// nothing.
package redistest
