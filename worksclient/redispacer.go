package worksclient

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of the RedisPacer options.
const (
	DefaultKeyPrefix    = "worksclient:pace:"
	DefaultRedisTimeout = time.Second
)

var (
	//go:embed lua/pace.lua
	paceLua    string
	paceScript = redis.NewScript(paceLua)
)

// RedisPacerOption configures a RedisPacer.
type RedisPacerOption func(*RedisPacer)

// WithKeyPrefix sets the prefix of the Redis keys the pacer writes, one
// hash per rate-limit key: prefix + the key with '{', '}', '%', spaces
// and control bytes written %XX (a key longer than 200 bytes that way is
// replaced by '#' and its SHA-256). With no hash tag in the prefix, keys
// spread over a Redis Cluster; a prefix such as "{works}:pace:" puts them
// all in one slot. Default: "worksclient:pace:".
func WithKeyPrefix(prefix string) RedisPacerOption {
	return func(p *RedisPacer) { p.prefix = prefix }
}

// WithRedisTimeout bounds each call to Redis; a call that takes longer
// fails Wait. Default: 1s.
func WithRedisTimeout(d time.Duration) RedisPacerOption {
	return func(p *RedisPacer) {
		if d > 0 {
			p.timeout = d
		}
	}
}

// RedisPacer is a RateLimiter whose spacing is shared by every process
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
// RedisPacer holds no state of its own and is safe for concurrent use.
type RedisPacer struct {
	client   redis.UniversalClient
	interval time.Duration
	prefix   string
	timeout  time.Duration
	bounded  bool // the client bounds its calls by the context's deadline

	onStart func(serverMicros int64) // tests: the server time of each start
}

var (
	_ RateLimiter = (*RedisPacer)(nil)
	_ Delayer     = (*RedisPacer)(nil)
)

// NewRedisPacer returns a RedisPacer in client that starts requests of one
// key at least interval apart. An interval ≤ 0 means DefaultInterval; an
// interval is counted in whole microseconds.
func NewRedisPacer(client redis.UniversalClient, interval time.Duration, opts ...RedisPacerOption) *RedisPacer {
	if interval <= 0 {
		interval = DefaultInterval
	}
	p := &RedisPacer{
		client:   client,
		interval: max(interval.Truncate(time.Microsecond), time.Microsecond),
		prefix:   DefaultKeyPrefix,
		timeout:  DefaultRedisTimeout,
	}
	for _, o := range opts {
		o(p)
	}
	p.bounded = boundedClient(client)
	return p
}

// Interval returns the spacing of starts per key.
func (p *RedisPacer) Interval() time.Duration { return p.interval }

// ErrBadReply is returned when Redis answers the pacing script with
// something it cannot have sent.
var ErrBadReply = errors.New("worksclient: unexpected reply from the pacing script")

// reply is the script's answer.
type reply struct {
	op    int64 // 0 start, 1 sleep, 2 given back, 3 delayed
	a, b  int64
	valid bool
}

// Wait implements RateLimiter.
func (p *RedisPacer) Wait(ctx context.Context, key string) error {
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
			err = sleep(ctx, SystemClock, time.Duration(r.a)*time.Microsecond)
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
func (p *RedisPacer) giveBack(ctx context.Context, rk string, token int64) {
	_, _ = p.run(context.WithoutCancel(ctx), rk, "g", token)
}

// Delay implements Delayer, on the server's clock.
func (p *RedisPacer) Delay(ctx context.Context, key string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	_, err := p.run(ctx, p.redisKey(key), "d", max(d.Microseconds(), 1))
	return err
}

// run runs the script once, bounded by the timeout. When ctx is done it
// returns ctx.Err() itself.
func (p *RedisPacer) run(ctx context.Context, rk, op string, arg int64) (reply, error) {
	if p.client == nil {
		return reply{}, errors.New("worksclient: redis pacer: nil client")
	}
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	v, err := redisCall(cctx, p.bounded, func(cctx context.Context) (any, error) {
		return paceScript.Run(cctx, p.client, []string{rk}, op, p.interval.Microseconds(), arg).Result()
	})
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return reply{}, cerr
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

// maxKeyPart is the longest escaped key kept in a Redis key as it is.
const maxKeyPart = 200

// redisKey returns the Redis key of a rate-limit key. The escaping is
// injective ('%' is escaped too, and an escaped key never starts with '#').
func (p *RedisPacer) redisKey(key string) string {
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
