// Package demotest checks an example service the same way for every
// framework: started by its entry point (a RunFunc) on a free loopback
// port, it must answer the example rules exactly and hold its clients'
// connections to the server limits of package demo.
//
// Start runs an entry point with "-addr 127.0.0.1:0" and returns the base
// URL its banner names, stopping it (and requiring it to return nil) when
// the test ends. Run checks what the banner's curl lines show: search's
// limit per second, with its 429 body and Retry-After; reindex's per
// caller per minute; /health exempt. Limits checks that the flags of
// demo.ServerLimitFlags are applied: each timeout closes the connections
// it is for, a header too large gets 431, and past -max-conns a new
// connection still reaches /health.
package demotest
