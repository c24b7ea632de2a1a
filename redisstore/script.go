package redisstore

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
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
var (
	//go:embed scripts/prelude.lua
	preludeSrc string
	//go:embed scripts/fixed_window.lua
	fixedWindowSrc string
	//go:embed scripts/sliding_window.lua
	slidingWindowSrc string
	//go:embed scripts/sliding_log.lua
	slidingLogRaw string
	//go:embed scripts/gcra.lua
	gcraSrc string
	//go:embed scripts/concurrency.lua
	concurrencySrc string
	//go:embed scripts/take.lua
	takeSrc string
	//go:embed scripts/take_single.lua
	takeSingleRaw string
	//go:embed scripts/settle_single.lua
	settleSingleRaw string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/settle.lua
	settleSrc string
)

// The sources that ask for inline fragments, spliced in (expandInline): the straight paths, and the
// sliding log's module, whose writes they repeat.
var (
	takeSingleSrc   = expandInline("take_single.lua", takeSingleRaw)
	settleSingleSrc = expandInline("settle_single.lua", settleSingleRaw)
	slidingLogSrc   = expandInline("sliding_log.lua", slidingLogRaw)
)

// inlineFS holds the inline fragments, scripts/inline/<name>.lua: a piece of Lua that the straight
// paths repeat (among themselves, or from a module), written once. They cannot share it as a
// function: in Redis's Lua every function is a closure made anew on every call, which costs more
// than the piece itself (BENCHMARKS.md, "What keeps the straight paths honest"). So a line
//
//	--@inline <name>
//
// asks for the fragment <name> where it stands, and expandInline splices in its text, each line
// indented as the marker is: the assembled script runs the same statements as if they were written
// there. A fragment has no parameters; its header comment (the comment lines it starts with, left
// out of the splice) names the locals it reads and sets, which every site declares under those names.
//
//go:embed scripts/inline/*.lua
var inlineFS embed.FS

// inlineMarker matches a line that asks for an inline fragment: its indentation and the name.
var inlineMarker = regexp.MustCompile(`(?m)^([ \t]*)--@inline ([a-z_]+)[ \t]*$`)

// inlineFragment returns the Lua of the fragment name, its header comment left out, and whether
// there is such a fragment.
func inlineFragment(name string) (string, bool) {
	b, err := inlineFS.ReadFile("scripts/inline/" + name + ".lua")
	if err != nil {
		return "", false
	}
	lines := strings.SplitAfter(string(b), "\n")
	for len(lines) > 0 && strings.HasPrefix(lines[0], "--") {
		lines = lines[1:]
	}
	return strings.Join(lines, ""), true
}

// expandInline returns src, a script file (a straight path, or a module), with every --@inline marker replaced by its
// fragment, indented as the marker; a fragment's own markers too (gcra_read asks for clock_us). A
// marker naming no fragment, and fragments asking for each other in a circle, are bugs in the
// scripts: they panic, when the package is initialised (a test holds every marker and fragment to
// each other).
func expandInline(file, src string) string {
	return expandInlineDepth(file, src, 0)
}

// maxInlineDepth is how deep fragments may ask for fragments.
const maxInlineDepth = 4

// expandInlineDepth is expandInline of src at depth, how many fragments deep src stands.
func expandInlineDepth(file, src string, depth int) string {
	if depth > maxInlineDepth {
		panic(fmt.Sprintf("redisstore: inline fragments nested deeper than %d at %s: do they ask for each other?", maxInlineDepth, file))
	}
	return inlineMarker.ReplaceAllStringFunc(src, func(line string) string {
		m := inlineMarker.FindStringSubmatch(line)
		frag, ok := inlineFragment(m[2])
		if !ok {
			panic(fmt.Sprintf("redisstore: %s asks for the inline fragment %q, which scripts/inline does not hold", file, m[2]))
		}
		frag = expandInlineDepth(m[2]+".lua", frag, depth+1)
		var b strings.Builder
		for l := range strings.SplitAfterSeq(strings.TrimSuffix(frag, "\n"), "\n") {
			if strings.TrimSpace(l) != "" {
				b.WriteString(m[1])
			}
			b.WriteString(strings.TrimSuffix(l, "\n"))
			b.WriteString("\n")
		}
		return strings.TrimSuffix(b.String(), "\n")
	})
}

// modules are the algorithm modules, in the order the scripts define them.
var modules = []string{fixedWindowSrc, gcraSrc, slidingWindowSrc, slidingLogSrc, concurrencySrc}

// takeScript is the entry point that decides 1 … admit.MaxRequests policies all-or-nothing.
var takeScript = newScript("take", assemble(takeSrc, false))

// releaseScript is the entry point that ends one lease of a concurrency key.
var releaseScript = newScript("release", assemble(releaseSrc, false))

// settleScript is the entry point that settles one reservation.
var settleScript = newScript("settle", assemble(settleSrc, false))

// entryPoints are the entry points' sources, their straight paths among them.
var entryPoints = []string{takeSingleSrc, takeSrc, releaseSrc, settleSingleSrc, settleSrc}

// straightPaths are the parts of the entry points that run before the prelude: the take script's
// single-policy path, the settle script's straight path (take_single.lua, settle_single.lua). Each
// decides the common calls itself and returns before the rest of the script runs, or falls through
// to it, having written nothing. Their source repeats no piece: each is written once, as an inline
// fragment (inlineFS) spliced in where a --@inline marker asks for it, before the SHA is taken.
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
	b.WriteString(preludeSrc)
	for _, m := range modules {
		b.WriteString(m)
	}
	b.WriteString(entry)
	return b.String()
}

// constants returns the Lua that defines the bounds every script checks, rendered from the Go
// constants so that Go and Lua share one source of truth:
//
//	MAX           the largest limit, count or cost: admit.MaxRate
//	MAX_WINDOW    the longest window in milliseconds: admit.MaxPeriod
//	MAX_DIGITS    the most decimal digits either may have
//	MAX_REQUESTS  the most policies one call decides: admit.MaxRequests
//	MAX_LOG       the largest limit of a sliding log, and the most entries its key holds: admit.MaxSlidingLogRate
//	MAX_LEASES    the largest limit of a concurrency key, and the most leases it holds: admit.MaxConcurrency
func constants() string {
	maxWindow := admit.MaxPeriod.Milliseconds()
	digits := max(len(strconv.FormatInt(admit.MaxRate, 10)), len(strconv.FormatInt(maxWindow, 10)))
	return fmt.Sprintf("local MAX = %d\nlocal MAX_WINDOW = %d\nlocal MAX_DIGITS = %d\nlocal MAX_REQUESTS = %d\n",
		admit.MaxRate, maxWindow, digits, admit.MaxRequests) +
		fmt.Sprintf("local MAX_LOG = %d\nlocal MAX_LEASES = %d\n", admit.MaxSlidingLogRate, admit.MaxConcurrency)
}

// gcraConstants returns the Lua that defines the bounds of the GCRA module, rendered from the Go
// constants:
//
//	MAX_TAT            the largest theoretical arrival time, in µs: algo.MaxTAT
//	MAX_TOLERANCE      the largest burst × emission interval, in µs: admit.MaxTolerance
//	INTERVAL_ROUNDING  rounding the interval up may slow the rate by less than 1 in this: admit.MaxIntervalRounding
func gcraConstants() string {
	return fmt.Sprintf("local MAX_TAT = %d\nlocal MAX_TOLERANCE = %d\nlocal INTERVAL_ROUNDING = %d\n",
		algo.MaxTAT, admit.MaxTolerance.Microseconds(), admit.MaxIntervalRounding)
}

// Script returns the Lua source of the entry point name, as redisstore loads it — the rendered
// constants, the prelude, every algorithm module and the entry point — and reports whether there is
// such an entry point: "take", "release" or "settle". It is for benchmarks and tools that call the script as
// redisstore does.
func Script(name string) (src string, ok bool) {
	switch name {
	case takeScript.name:
		return takeScript.src, true
	case releaseScript.name:
		return releaseScript.src, true
	case settleScript.name:
		return settleScript.src, true
	}
	return "", false
}
