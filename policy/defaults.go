package policy

import (
	"github.com/admit-dev/admit/internal/bound"
)

// setDefaults fills what the file leaves out: the default step. It runs only on a file that parsed,
// and sets only fields the file did not.
func (f *rawFile) setDefaults() {
	s := &f.server
	def(&s.listen, DefaultListen)
	def(&s.ipv6Prefix, DefaultIPv6Prefix)
	def(&s.rateLimitHeaders, true)
	def(&s.localCacheMaxAge, DefaultLocalCacheMaxAge)
	def(&s.topSize, DefaultTopSize)
	def(&s.topPeriod, DefaultTopPeriod)
	def(&s.redisCommandTimeout, DefaultRedisCommandTimeout)
	def(&s.breakerFailures, DefaultBreakerFailures)
	def(&s.breakerCoolOff, DefaultBreakerCoolOff)
	for i := range f.policies {
		p := &f.policies[i]
		def(&p.version, bound.DefaultVersion)
		def(&p.mode, "enforce")
		def(&p.failure, Closed.String())
	}
	for i := range f.routes {
		r := &f.routes[i]
		def(&r.cost, 1)
		def(&r.subjectFrom, SubjectClientIP)
	}
}

// def sets f's value to v when the file leaves f out.
func def[T any](f *field[T], v T) {
	if f.missing() {
		f.v = v
	}
}
