// Package bench compares admit with other Go rate limiters on Redis, side by side in one run.
//
// It is its own module, so that the libraries it compares against never become dependencies of
// admit. It has no code of its own, only benchmarks: run them with `make bench` from the root.
package bench
