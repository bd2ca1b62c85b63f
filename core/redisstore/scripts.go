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
	//go:embed lua/stack.lua
	stackLua string
	//go:embed lua/undo_driver.lua
	undoDriver string
	//go:embed lua/fixed_undo.lua
	fixedUndo string
	//go:embed lua/sliding_undo.lua
	slidingUndo string
	//go:embed lua/bucket_undo.lua
	bucketUndo string
	//go:embed lua/gcra_undo.lua
	gcraUndo string
	//go:embed lua/calendar_undo.lua
	calendarUndo string
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
var batchScript = built(crossSlot, decider[:], "decide", batchLua)

// crossSlot is the shebang of the scripts that touch keys of several hash
// slots of one Cluster node (Redis 7.0 or newer).
const crossSlot = "#!lua flags=allow-cross-slot-keys\n"

// built returns the script of head, then a table build whose entry
// build[algorithm value + 1] is a function that defines parts[algorithm]
// and returns ret, then main.
func built(head string, parts []string, ret, main string) *script {
	var b strings.Builder
	b.WriteString(head)
	b.WriteString("local build = {}\n")
	for a, src := range parts {
		fmt.Fprintf(&b, "build[%d] = function()\n%s\nreturn %s\nend\n", a+1, src, ret)
	}
	b.WriteString(main)
	return newScript(b.String())
}

// undoer holds the Lua that defines, after an algorithm's decider,
// undo(key, A, o, m, at, now): the give-back of a decision that admitted
// at the server's time at (see the files).
var undoer = [...]string{
	algo.FixedWindow:   fixedUndo,
	algo.SlidingWindow: slidingUndo + undoDriver,
	algo.TokenBucket:   bucketUndo + undoDriver,
	algo.GCRA:          gcraUndo + undoDriver,
	calendarWindow:     calendarUndo,
}

// stackScripts run the takes of one request, all or nothing, on one node,
// or give them back (stack.lua): build[algorithm value + 1] returns the
// algorithm's decide, undo and mark. stackScripts[0] declares no flags, for
// takes whose keys share a hash slot (and any server that is not a
// Cluster, miniredis included); stackScripts[1] lets the keys lie in
// several hash slots of one Cluster node, as the batch script does.
var stackScripts = func() (out [2]*script) {
	parts := make([]string, len(decider))
	for a := range decider {
		parts[a] = decider[a] + undoer[a]
	}
	main := fmt.Sprintf("local FIXED = %d\n%s", algo.FixedWindow+1, stackLua)
	return [2]*script{built("", parts, "decide, undo, mark", main), built(crossSlot, parts, "decide, undo, mark", main)}
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
