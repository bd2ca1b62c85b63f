// Package redisbound bounds a call to a go-redis client by its context,
// whether or not the client does so itself.
//
// go-redis applies a context's deadline to its socket reads and writes
// only when the client has ContextTimeoutEnabled (off by default); without
// it a call to a Redis that has stopped answering lasts until the
// client's own ReadTimeout, whatever the context says. Bounded tells the
// two kinds of client apart, and Call runs a call on the calling
// goroutine for a client that is bounded, and otherwise on a goroutine of
// its own that it stops waiting for when the context is done.
//
// It serves every package of the module that talks to Redis
// (core/redisstore, worksclient/worksredis, outbound/redishold).
package redisbound
