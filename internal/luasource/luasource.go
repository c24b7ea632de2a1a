// Package luasource holds the Lua source of redisstore's entry points as redisstore loads them,
// for the benchmarks and tools of this repository that call the scripts as redisstore does. It is
// internal: the scripts and their arguments are no public API.
package luasource

// sources maps an entry point's name to its source. It is filled by Register from the init of
// package redisstore, before any main or test runs, and only read afterwards.
var sources = map[string]string{}

// Register records src as the source of the entry point name. Package redisstore calls it, once
// per entry point, from its package initialization; a program that needs the sources imports
// redisstore.
func Register(name, src string) { sources[name] = src }

// Lookup returns the Lua source of the entry point name, as redisstore loads it — the rendered
// constants, the prelude, every algorithm module and the entry point — and reports whether there is
// such an entry point: "take", "release" or "settle" (once package redisstore is linked in).
func Lookup(name string) (src string, ok bool) {
	src, ok = sources[name]
	return src, ok
}
