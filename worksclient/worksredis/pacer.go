package worksredis

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/internal/redisbound"
	"github.com/rlkit/rlkit/worksclient"
)

// Defaults of the Pacer options.
const (
	DefaultKeyPrefix = "worksclient:pace:"
	DefaultTimeout   = time.Second
)

var (
	//go:embed lua/pace.lua
	paceLua    string
	paceScript = redis.NewScript(paceLua)
)

// PacerOption configures a Pacer.
type PacerOption func(*Pacer)

// WithKeyPrefix sets the prefix of the Redis keys the pacer writes, one
// hash per rate-limit key: prefix + the key with '{', '}', '%', spaces
// and control bytes written %XX (a key longer than 200 bytes that way is
// replaced by '#' and its SHA-256). With no hash tag in the prefix, keys
// spread over a Redis Cluster; a prefix such as "{works}:pace:" puts them
// all in one slot. Default: "worksclient:pace:".
func WithKeyPrefix(prefix string) PacerOption {
	return func(p *Pacer) { p.prefix = prefix }
}

// WithTimeout bounds each call of a Pacer to Redis; a call that takes
// longer fails Wait. Default: DefaultTimeout (1s).
func WithTimeout(d time.Duration) PacerOption {
	return func(p *Pacer) {
		if d > 0 {
			p.timeout = d
		}
	}
}

// Pacer is a worksclient.RateLimiter whose spacing is shared by every process
// that paces the same keys in the same Redis: for each key, requests start
// at least interval apart on the Redis server's clock, whichever process
// sends them.
//
// Each call is one Lua script (EVALSHA, EVAL when the server lacks it)
// that reads the time with TIME on the server, so processes with skewed
// clocks agree. The spacing is exact on the server's clock, at the
// instants the script grants the starts; a request leaves its process
// when the grant has come back, so the gaps seen locally, or at the API,
// also vary by the variation of that half round trip. Wait is one round trip when the key is free. Otherwise the
// script reserves the key's next slot and Wait sleeps until it (a timer
// and ctx), then confirms with a second round trip, which makes the start
// at least interval after the previous actual start (a request whose
// timer fired late pushes the next one back) and after any hold put in
// meanwhile by Delay. Reservations give the order of starts: first come,
// first served across processes.
//
// When ctx is done while Wait sleeps, Wait returns ctx.Err(), after giving
// the slot back. The give-back costs one more round trip to Redis before
// Wait returns (bounded by the timeout, not by ctx, which is done), and it
// frees the slot only when that slot is still the key's latest
// reservation; when a later request has reserved one since, the slot
// stays empty, since moving the later reservations would need their
// processes to hear of it. Spacing never suffers; only throughput does,
// by one interval.
//
// When Redis fails or does not answer within the timeout, Wait returns the
// error, and the request must not be sent: a Transport returns it. A
// Pacer holds no state of its own and is safe for concurrent use.
type Pacer struct {
	client   redis.UniversalClient
	interval time.Duration
	prefix   string
	timeout  time.Duration
	bounded  bool // the client bounds its calls by the context's deadline

	onStart func(serverMicros int64) // tests: the server time of each start
}

var (
	_ worksclient.RateLimiter = (*Pacer)(nil)
	_ worksclient.Delayer     = (*Pacer)(nil)
)

// NewPacer returns a Pacer in client that starts requests of one key at
// least interval apart. An interval ≤ 0 means worksclient.DefaultInterval
// (250 ms, 240 a minute); an interval is counted in whole microseconds.
func NewPacer(client redis.UniversalClient, interval time.Duration, opts ...PacerOption) *Pacer {
	if interval <= 0 {
		interval = worksclient.DefaultInterval
	}
	p := &Pacer{
		client:   client,
		interval: max(interval.Truncate(time.Microsecond), time.Microsecond),
		prefix:   DefaultKeyPrefix,
		timeout:  DefaultTimeout,
	}
	for _, o := range opts {
		o(p)
	}
	p.bounded = redisbound.Bounded(client)
	return p
}

// Interval returns the spacing of starts per key.
func (p *Pacer) Interval() time.Duration { return p.interval }

// ErrBadReply is returned when Redis answers the pacing script with
// something it cannot have sent.
var ErrBadReply = errors.New("worksclient: unexpected reply from the pacing script")

// reply is the script's answer.
type reply struct {
	op    int64 // 0 start, 1 sleep, 2 given back, 3 delayed
	a, b  int64
	valid bool
}

// Wait implements worksclient.RateLimiter.
func (p *Pacer) Wait(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rk := p.redisKey(key)
	r, err := p.run(ctx, rk, "r", 0)
	for err == nil {
		switch r.op {
		case 0:
			if p.onStart != nil {
				p.onStart(r.a)
			}
			return nil
		case 1:
			token := r.b
			err = sleep(ctx, time.Duration(r.a)*time.Microsecond)
			if err == nil {
				r, err = p.run(ctx, rk, "c", token)
			}
			if err != nil && ctx.Err() != nil {
				p.giveBack(ctx, rk, token)
				return ctx.Err()
			}
		default:
			return fmt.Errorf("%w: operation %d", ErrBadReply, r.op)
		}
	}
	return err
}

// giveBack gives a reservation back, bounded by the timeout but not by ctx,
// which is done.
func (p *Pacer) giveBack(ctx context.Context, rk string, token int64) {
	_, _ = p.run(context.WithoutCancel(ctx), rk, "g", token)
}

// Delay implements worksclient.Delayer, on the server's clock.
func (p *Pacer) Delay(ctx context.Context, key string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	_, err := p.run(ctx, p.redisKey(key), "d", max(d.Microseconds(), 1))
	return err
}

// run runs the script once, bounded by the timeout. When ctx is done it
// returns ctx.Err() itself.
func (p *Pacer) run(ctx context.Context, rk, op string, arg int64) (reply, error) {
	if p.client == nil {
		return reply{}, errors.New("worksclient: redis pacer: nil client")
	}
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	v, err := redisbound.Call(cctx, p.bounded, &inflight, paceCall{p, rk, op, arg}, runPace)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return reply{}, cerr
		}
		if err == redisbound.ErrTimeout {
			err = cctx.Err() // the timeout's, as a bounded client reports it
		}
		return reply{}, fmt.Errorf("worksclient: redis pacer: %w", err)
	}
	var r reply
	if s, ok := v.([]any); ok && len(s) >= 2 {
		r.op, r.valid = s[0].(int64)
		r.a, _ = s[1].(int64)
		if len(s) > 2 {
			r.b, _ = s[2].(int64)
		}
	}
	if !r.valid || r.a < 0 {
		return reply{}, fmt.Errorf("%w: %v", ErrBadReply, v)
	}
	return r, nil
}

// paceCall is one run of the pacing script.
type paceCall struct {
	p   *Pacer
	rk  string
	op  string
	arg int64
}

func runPace(ctx context.Context, c paceCall) (any, error) {
	return paceScript.Run(ctx, c.p.client, []string{c.rk}, c.op, c.p.interval.Microseconds(), c.arg).Result()
}

// maxKeyPart is the longest escaped key kept in a Redis key as it is.
const maxKeyPart = 200

// redisKey returns the Redis key of a rate-limit key. The escaping is
// injective ('%' is escaped too, and an escaped key never starts with '#').
func (p *Pacer) redisKey(key string) string {
	const hex = "0123456789ABCDEF"
	n := len(key)
	for i := 0; i < len(key); i++ {
		if escapeByte(key[i], i) {
			n += 2
		}
	}
	if n > maxKeyPart {
		sum := sha256.Sum256([]byte(key))
		return p.prefix + "#" + base64.RawURLEncoding.EncodeToString(sum[:])
	}
	b := make([]byte, 0, len(p.prefix)+n)
	b = append(b, p.prefix...)
	for i := 0; i < len(key); i++ {
		if c := key[i]; escapeByte(c, i) {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func escapeByte(c byte, i int) bool {
	return c <= ' ' || c >= 0x7f || c == '{' || c == '}' || c == '%' || (i == 0 && c == '#')
}
