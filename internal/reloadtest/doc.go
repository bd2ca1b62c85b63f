// Package reloadtest is the scenario of configurations reloaded while
// callers spend their quotas: what each caller spent carries over to a
// rule's new count, burst, weights or place in the file, and a new name,
// algorithm or period starts afresh. Run plays it through a core.Limiter
// on any store; core's tests run it on the memory store, redisstore's on
// a Redis server and a Cluster.
package reloadtest
