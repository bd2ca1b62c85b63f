package core

import "context"

// decisionKey is the context key of a request's Decision.
type decisionKey struct{}

// NewContext returns a copy of ctx that carries d, the Decision of the
// request ctx belongs to; FromContext gives it back. The adapters call it
// for every request they pass on when their limiter has
// WithDecisionContext(true), so that a handler can read the rule, the
// remaining quota (d.Result.Remaining) or the store key of its own
// request. Wrapping a context allocates, and so does moving d to the
// heap: the adapters do neither unless asked.
func NewContext(ctx context.Context, d *Decision) context.Context {
	return context.WithValue(ctx, decisionKey{}, d)
}

// FromContext returns the Decision NewContext put in ctx, and ok false
// when there is none (the limiter has no WithDecisionContext(true), or
// the middleware did not pass the request on). A Decision whose Rule is nil counted
// nothing: limiting off, an exempt path, a bypassed caller. The Decision
// is the request's own copy: the middleware does not read it again.
func FromContext(ctx context.Context) (d *Decision, ok bool) {
	d, ok = ctx.Value(decisionKey{}).(*Decision)
	return d, ok && d != nil
}
