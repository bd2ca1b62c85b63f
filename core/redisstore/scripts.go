package redisstore

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"

	"github.com/rlkit/rlkit/core"
)

var (
	//go:embed lua/prelude.lua
	prelude string
	//go:embed lua/driver.lua
	driver string
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
)

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

// decision holds the decision script of each algorithm: the shared prelude,
// the algorithm's load/take/save, and the shared driver (the fixed window's
// script stands alone).
var decision = [...]*script{
	core.FixedWindow:   newScript(fixedLua), // stands alone
	core.SlidingWindow: newScript(prelude + slidingLua + driver),
	core.TokenBucket:   newScript(prelude + bucketLua + driver),
	core.GCRA:          newScript(prelude + gcraLua + driver),
}

// resets holds the reset script of each algorithm: the fixed window's
// stands alone; the others are the prelude, the algorithm's load/take and
// the reset driver, which asks take whether a counter is live.
var resets = [...]*script{
	core.FixedWindow:   newScript(resetLua),
	core.SlidingWindow: newScript(prelude + slidingLua + resetDriver),
	core.TokenBucket:   newScript(prelude + bucketLua + resetDriver),
	core.GCRA:          newScript(prelude + gcraLua + resetDriver),
}
