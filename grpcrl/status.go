package grpcrl

import (
	"net/http"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rlkit/rlkit/core"
)

// DeniedStatus is the status a call refused with d ends with by default:
//
//   - over a limit (or under a penalty): ResourceExhausted, the message
//     "Rate limit exceeded for '<rule>' requests" and a google.rpc.RetryInfo
//     detail whose retry_delay is the wait, d.Result.RetryAfter (the
//     retry-after metadata gives it in whole seconds, rounded up), or one
//     second for a call refused by its rule's concurrency limit
//     (d.ConcurrencyDenied: as many calls of its identity in flight as
//     the rule allows);
//   - the store failed and the policy is fail-closed: Unavailable,
//     "Rate limiter unavailable", RetryInfo of one second;
//   - a banned network (d.Banned): PermissionDenied, "Forbidden", no
//     RetryInfo (waiting lifts no ban).
//
// These are the gRPC forms of the HTTP adapters' 429, 503 and 403. For an
// allowed d it is the OK status (whose Err is nil).
func DeniedStatus(d *core.Decision) *status.Status {
	switch d.Status() {
	case http.StatusOK:
		return status.New(codes.OK, "")
	case http.StatusForbidden:
		return status.New(codes.PermissionDenied, "Forbidden")
	case http.StatusServiceUnavailable:
		return withRetry(status.New(codes.Unavailable, "Rate limiter unavailable"), time.Second)
	}
	wait := d.Result.RetryAfter
	if d.ConcurrencyDenied {
		wait = time.Second // no wait is known: a slot comes back when a call ends
	}
	return withRetry(status.New(codes.ResourceExhausted, "Rate limit exceeded for '"+d.Rule.Name+"' requests"), wait)
}

// withRetry adds a RetryInfo detail of delay to st.
func withRetry(st *status.Status, delay time.Duration) *status.Status {
	if with, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}); err == nil {
		return with
	}
	return st // unreachable: a RetryInfo always marshals
}

// limitMetadata returns the metadata that carries d's rate-limit headers
// and, when it is denied (not banned), retry-after: the names an HTTP
// adapter writes, in lower case (ratelimit-policy and ratelimit, or
// x-ratelimit-limit, -remaining and -reset), with the same values. nil
// when there are none. The values share one string and the entries one
// backing array: three allocations and the map's.
func limitMetadata(d *core.Decision) metadata.MD {
	var (
		names   [maxEntries]string
		ends    [maxEntries]int
		scratch [128]byte
		buf     [256]byte
	)
	all, n := buf[:0], 0
	for ; n < maxEntries; n++ {
		name, value, ok := d.LimitHeader(n, scratch[:0])
		if !ok {
			break
		}
		names[n] = lowerName(name)
		all = append(all, value...)
		ends[n] = len(all)
	}
	if n == 0 {
		return nil
	}
	text := string(all)
	entries := make([]string, n)
	md := make(metadata.MD, n)
	for i, from := 0, 0; i < n; i++ {
		entries[i] = text[from:ends[i]]
		md[names[i]] = entries[i : i+1 : i+1]
		from = ends[i]
	}
	return md
}

// maxEntries bounds the metadata entries of a decision: three legacy
// headers and retry-after.
const maxEntries = 4

// lowerName is name in lower case, the form of gRPC metadata keys, without
// allocating for the names rlkit reads or writes.
func lowerName(name string) string {
	switch name {
	case "Ratelimit-Policy":
		return "ratelimit-policy"
	case "Ratelimit":
		return "ratelimit"
	case "X-Ratelimit-Limit":
		return "x-ratelimit-limit"
	case "X-Ratelimit-Remaining":
		return "x-ratelimit-remaining"
	case "X-Ratelimit-Reset":
		return "x-ratelimit-reset"
	case "Retry-After":
		return "retry-after"
	case "Ratelimit-Remaining":
		return "ratelimit-remaining"
	case "Ratelimit-Reset":
		return "ratelimit-reset"
	case "Date":
		return "date"
	case "X-Forwarded-For":
		return "x-forwarded-for"
	case "Forwarded":
		return "forwarded"
	case "X-Real-Ip":
		return "x-real-ip"
	}
	return strings.ToLower(name)
}

// httpStatus is the HTTP status a rule counted by outcome (see
// core.RuleSpec.Count) counts a call under: the HTTP form of the status the
// handler ended it with (err), as the gRPC-HTTP mapping of google.rpc.Code
// gives it (OK 200, InvalidArgument 400, NotFound 404, Internal 500...).
// A handler that did not return (it panicked) counts as 500.
func httpStatus(err error, returned bool) int {
	if !returned {
		return http.StatusInternalServerError
	}
	if c := status.Code(err); int(c) < len(codeStatus) {
		return codeStatus[c]
	}
	return http.StatusInternalServerError
}

// codeStatus maps each gRPC code to its HTTP status.
var codeStatus = [...]int{
	codes.OK:                 http.StatusOK,
	codes.Canceled:           499, // client closed request
	codes.Unknown:            http.StatusInternalServerError,
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.DeadlineExceeded:   http.StatusGatewayTimeout,
	codes.NotFound:           http.StatusNotFound,
	codes.AlreadyExists:      http.StatusConflict,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.ResourceExhausted:  http.StatusTooManyRequests,
	codes.FailedPrecondition: http.StatusBadRequest,
	codes.Aborted:            http.StatusConflict,
	codes.OutOfRange:         http.StatusBadRequest,
	codes.Unimplemented:      http.StatusNotImplemented,
	codes.Internal:           http.StatusInternalServerError,
	codes.Unavailable:        http.StatusServiceUnavailable,
	codes.DataLoss:           http.StatusInternalServerError,
	codes.Unauthenticated:    http.StatusUnauthorized,
}
