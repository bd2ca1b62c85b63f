package redisstore

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/rlkit/rlkit/core/algo"
)

var (
	//go:embed lua/prelude.lua
	prelude string
	//go:embed lua/driver.lua
	driver string
	//go:embed lua/single.lua
	single string
	//go:embed lua/batch.lua
	batchLua string
	//go:embed lua/fixed.lua
	fixedLua string
	//go:embed lua/sliding.lua
	slidingLua string
	//go:embed lua/bucket.lua
	bucketLua string
	//go:embed lua/gcra.lua
	gcraLua string
	//go:embed lua/reset.lua
	resetLua string
	//go:embed lua/reset_driver.lua
	resetDriver string
	//go:embed lua/calendar.lua
	calendarLua string
	//go:embed lua/calendar_reset.lua
	calendarResetLua string
)

// calendarWindow indexes the scripts of a fixed window over calendar
// periods (algo.Limit.Calendar), after the algorithms' own: a plan's
// algorithm for a policy of calendar limits.
const calendarWindow = algo.GCRA + 1

// script is one Lua script, run with EVALSHA and, when the server does not
// know it yet (NOSCRIPT), EVAL, as redis.Script does.
type script struct {
	src  string
	sha  any // the SHA-1, boxed once
	eval any // the source, boxed once
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:]), eval: src}
}

// decider holds the Lua that defines decide(key, A, o, m, now_us), one
// decision, per algorithm: the shared prelude, the algorithm's
// load/take/encode and the shared driver (the fixed window's, and the
// calendar window's, stand alone).
var decider = [...]string{
	algo.FixedWindow:   fixedLua,
	algo.SlidingWindow: prelude + slidingLua + driver,
	algo.TokenBucket:   prelude + bucketLua + driver,
	algo.GCRA:          prelude + gcraLua + driver,
	calendarWindow:     calendarLua,
}

// decision holds the decision script of each algorithm: its decide and the
// tail that applies it to KEYS[1] and ARGV.
var decision = [...]*script{
	algo.FixedWindow:   newScript(decider[algo.FixedWindow] + single),
	algo.SlidingWindow: newScript(decider[algo.SlidingWindow] + single),
	algo.TokenBucket:   newScript(decider[algo.TokenBucket] + single),
	algo.GCRA:          newScript(decider[algo.GCRA] + single),
	calendarWindow:     newScript(decider[calendarWindow] + single),
}

// batchScript runs several decisions, of any algorithms, in one call: each
// algorithm's decide is built by a function of its own, build[algorithm
// value + 1], which the batch calls only for the algorithms it meets (so a
// call defines the Lua functions of those alone), then batch.lua. Its
// shebang lets it touch keys of several hash slots of one Cluster node
// (Redis 7.0 or newer).
var batchScript = func() *script {
	var b strings.Builder
	b.WriteString("#!lua flags=allow-cross-slot-keys\nlocal build = {}\n")
	for a, src := range decider {
		fmt.Fprintf(&b, "build[%d] = function()\n%s\nreturn decide\nend\n", a+1, src)
	}
	b.WriteString(batchLua)
	return newScript(b.String())
}()

// resets holds the reset script of each algorithm: the fixed window's
// stands alone; the others are the prelude, the algorithm's load/take and
// the reset driver, which asks take whether a counter is live.
var resets = [...]*script{
	algo.FixedWindow:   newScript(resetLua),
	algo.SlidingWindow: newScript(prelude + slidingLua + resetDriver),
	algo.TokenBucket:   newScript(prelude + bucketLua + resetDriver),
	algo.GCRA:          newScript(prelude + gcraLua + resetDriver),
	calendarWindow:     newScript(calendarResetLua),
}
