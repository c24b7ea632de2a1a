package redisstore

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/luasource"
	"github.com/admit-dev/admit/internal/validate"
)

// A script is one Lua file and its SHA1, the name EVALSHA calls it by.
type script struct {
	name string
	src  string
	sha  string
}

func newScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

// The Lua sources: a prelude, one module per algorithm, and the entry points, each assembled into
// one script (scripts are files, assembled from modules, one SHA per entry point: docs/redis.md, "Scripts").
// The straight paths, take_single.lua and settle_single.lua, are generated from their templates in
// scripts/straight/ and the fragments they ask for (internal/tools/luagen); a test of luagen fails
// while a checked-in one is stale.
//
//go:generate go run ../internal/tools/luagen -dir scripts
var (
	//go:embed scripts/integer.lua
	integerSrc string
	//go:embed scripts/prelude.lua
	preludeSrc string
	//go:embed scripts/fixed_window.lua
	fixedWindowSrc string
	//go:embed scripts/sliding_window.lua
	slidingWindowSrc string
	//go:embed scripts/sliding_log.lua
	slidingLogSrc string
	//go:embed scripts/gcra.lua
	gcraSrc string
	//go:embed scripts/concurrency.lua
	concurrencySrc string
	//go:embed scripts/take.lua
	takeSrc string
	//go:embed scripts/take_single.lua
	takeSingleSrc string // generated
	//go:embed scripts/settle_single.lua
	settleSingleSrc string // generated
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/settle.lua
	settleSrc string
	//go:embed scripts/batch.lua
	batchSrc string
)

// modules are the algorithm modules, in the order the scripts define them.
var modules = []string{fixedWindowSrc, gcraSrc, slidingWindowSrc, slidingLogSrc, concurrencySrc}

// takeScript is the entry point that decides 1 … bound.MaxRequests policies all-or-nothing.
var takeScript = newScript("take", assemble(takeSrc, false))

// releaseScript is the entry point that ends one lease of a concurrency key.
var releaseScript = newScript("release", assemble(releaseSrc, false))

// settleScript is the entry point that settles one reservation.
var settleScript = newScript("settle", assemble(settleSrc, false))

// batchScript is the entry point that decides several takes, each as takeScript would, in turn
// (coalesce.go).
var batchScript = newScript("batch", assembleBatch(false))

// entryPoints are the entry points' sources, their straight paths among them.
var entryPoints = []string{takeSingleSrc, takeSrc, releaseSrc, settleSingleSrc, settleSrc, batchSrc}

// straightPaths are the parts of the entry points that run before the prelude: the take script's
// single-policy path, the settle script's straight path (take_single.lua, settle_single.lua). Each
// decides the common calls itself and returns before the rest of the script runs, or falls through
// to it, having written nothing. Their source repeats no piece: each is written once, as a fragment
// that luagen splices in where their template asks for it.
var straightPaths = map[string]string{takeSrc: takeSingleSrc, settleSrc: settleSingleSrc}

// assemble returns the script of an entry point: the rendered constants, its straight path if it has
// one (straightPaths), the prelude, every algorithm module, then the entry point itself. A test assembly (testClock) reads the time from its
// last argument, Unix microseconds, instead of Redis's TIME, so that tests can fix it; production
// scripts read Redis's clock only.
func assemble(entry string, testClock bool) string {
	var b strings.Builder
	b.WriteString(constants())
	b.WriteString(gcraConstants()) // before the straight paths, which decide gcra too
	fmt.Fprintf(&b, "local CLOCK_FROM_ARGV = %t\n", testClock)
	b.WriteString(straightPaths[entry])
	b.WriteString(integerSrc)
	b.WriteString(preludeSrc)
	for _, m := range modules {
		b.WriteString(m)
	}
	b.WriteString(entry)
	return b.String()
}

// assembleBatch returns the batch script (scripts/batch.lua): the take script's straight path, and
// the rest of its assembly (the prelude, the modules and take.lua), each wrapped in a function,
// take_straight and take_general, which read KEYS and ARGV as locals the batch fills for each
// request in turn, and the time from the last argument (CLOCK_FROM_ARGV), where the batch puts its
// own: Redis's TIME, read once, or, in a test assembly, the batch's last argument. take_general runs
// the prelude and defines the modules afresh for each request that falls through the straight path,
// as the take script does for its call, and only then.
func assembleBatch(testClock bool) string {
	var b strings.Builder
	b.WriteString(constants())
	b.WriteString(gcraConstants())
	fmt.Fprintf(&b, "local MAX_BATCH = %d\nlocal BATCH_TEST_CLOCK = %t\nlocal CLOCK_FROM_ARGV = true\n", maxBatch, testClock)
	b.WriteString("local BATCH_KEYS, BATCH_ARGV = KEYS, ARGV\nlocal KEYS, ARGV = {}, {}\n")
	b.WriteString(integerSrc) // once, for the batch and every request's prelude
	b.WriteString("local function take_straight()\n")
	b.WriteString(takeSingleSrc)
	b.WriteString("end\nlocal function take_general()\n")
	b.WriteString(preludeSrc)
	for _, m := range modules {
		b.WriteString(m)
	}
	b.WriteString(takeSrc)
	b.WriteString("end\n")
	b.WriteString(batchSrc)
	return b.String()
}

// constants returns the Lua that defines the bounds every script checks, rendered from the Go
// constants so that Go and Lua share one source of truth:
//
//	MAX           the largest limit, count or cost: bound.MaxRate
//	MAX_WINDOW    the longest window in milliseconds: bound.MaxPeriod
//	MAX_DIGITS    the most decimal digits either may have
//	MAX_REQUESTS  the most policies one call decides: bound.MaxRequests
//	MAX_LOG       the largest limit of a sliding log, and the most entries its key holds: bound.MaxSlidingLogRate
//	MAX_LEASES    the largest limit of a concurrency key, and the most leases it holds: bound.MaxConcurrency
//	MAX_REASON    the longest reason of an override, in bytes: validate.MaxReasonLen
func constants() string {
	maxWindow := bound.MaxPeriod.Milliseconds()
	digits := max(len(strconv.FormatInt(bound.MaxRate, 10)), len(strconv.FormatInt(maxWindow, 10)))
	return fmt.Sprintf("local MAX = %d\nlocal MAX_WINDOW = %d\nlocal MAX_DIGITS = %d\nlocal MAX_REQUESTS = %d\n",
		bound.MaxRate, maxWindow, digits, bound.MaxRequests) +
		fmt.Sprintf("local MAX_LOG = %d\nlocal MAX_LEASES = %d\nlocal MAX_REASON = %d\n", bound.MaxSlidingLogRate, bound.MaxConcurrency, validate.MaxReasonLen)
}

// gcraConstants returns the Lua that defines the bounds of the GCRA module, rendered from the Go
// constants:
//
//	MAX_TAT            the largest theoretical arrival time, in µs: algo.MaxTAT
//	MAX_TOLERANCE      the largest burst × emission interval, in µs: bound.MaxTolerance
//	INTERVAL_ROUNDING  rounding the interval up may slow the rate by less than 1 in this: bound.MaxIntervalRounding
func gcraConstants() string {
	return fmt.Sprintf("local MAX_TAT = %d\nlocal MAX_TOLERANCE = %d\nlocal INTERVAL_ROUNDING = %d\n",
		algo.MaxTAT, bound.MaxTolerance.Microseconds(), bound.MaxIntervalRounding)
}

// init makes the entry points' sources known to the benchmarks and tools of this repository
// (internal/luasource), which call the scripts as redisstore does.
func init() {
	for _, sc := range []*script{takeScript, releaseScript, settleScript, batchScript} {
		luasource.Register(sc.name, sc.src)
	}
}
