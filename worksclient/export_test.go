package worksclient

import "time"

// OnStart makes p call f at each start, with the instant the pacer took
// as the start (under its lock: f must be quick).
func OnStart(p *Pacer, f func(key string, at time.Time)) { p.onStart = f }
