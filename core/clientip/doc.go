// Package clientip works out the client IP of an HTTP request: the
// identity rlkit counts a request under when it has no other, and the
// address its allow and ban networks are matched against. A Config says
// which proxies to believe; its ClientIP and ClientAddr take the request's
// RemoteAddr and its headers, so any framework can use it.
//
// Most programs set it once on their limiter and leave the rest to the
// middlewares:
//
//	proxies, err := clientip.ParseTrustedProxies("10.0.0.0/8")
//	if err != nil { ... }
//	lim := core.NewLimiter(cfg, core.WithClientIP(clientip.Config{TrustedProxies: proxies}))
//
// # Trust model
//
// The TCP peer's address is the one thing a client cannot forge. A
// header (X-Forwarded-For, Forwarded or X-Real-IP, whichever Config.Header
// names) is believed only when the peer is a proxy listed in
// TrustedProxies, and then only for the hops that trusted proxies
// appended: X-Forwarded-For and Forwarded are read from right to left,
// skipping trusted hops, and the first untrusted hop is the client (the
// leftmost hop when every hop is trusted): the leftmost value, which the
// client wrote, is never taken for being leftmost. X-Real-IP is one
// address, believed from a trusted peer when it is valid. A hop that is not an IP address ends the walk at the last
// trusted address, so that a random value per request never becomes a
// fresh identity. The zero Config trusts nobody: the answer is always the
// peer's address. Trusting 0.0.0.0/0 or ::/0 lets every client choose its
// own identity.
//
// # IPv6
//
// One host usually holds a whole IPv6 /64 and could take a fresh address,
// and a fresh quota, for every request. ClientIP therefore groups IPv6
// clients by their first IPv6PrefixLen bits (64 by default: the /64's
// first address, "2001:db8:1:2::"); IPv4 clients, and IPv4-mapped IPv6
// ones, count per address. ClientAddr is the same answer without the
// grouping: the allow and ban networks match whole addresses.
//
// ClientIP and ClientAddr never panic. Their answers are canonical
// (netip's form, IPv4-mapped addresses unmapped, ports and zones
// dropped) and, in the common cases, substrings of the input, made
// without allocating.
package clientip
