// Package bench compares admit with other Go rate limiters on Redis, side by side in one run, and
// admit serve with envoyproxy/ratelimit's service and a bare net/http handler (the Service
// groups: each a process of its own, on its own redis-server, under admit bench's load engine).
//
// It is its own module, so that the libraries it compares against never become dependencies of
// admit. It has no code of its own but the bare handler (barecheck), only benchmarks: run them with
// `make bench` from the root.
package bench
