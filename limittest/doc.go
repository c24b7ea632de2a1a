// Package limittest implements a conformance suite for implementations of admit.Store.
//
// Every Store — the in-process memstore, the Redis store, a decorator that wraps either — must make the
// same decisions (docs/guarantees.md). [TestStore] proves it: call it from a Test function in the store's own
// package, with a function that returns a fresh [Backend] for each subtest:
//
//	func TestConformance(t *testing.T) {
//		limittest.TestStore(t, func(t *testing.T) limittest.Backend {
//			return newBackend(t) // a Backend of your Store
//		})
//	}
//
// A Backend opens Stores that share state, and lets time pass for all of them: an in-process store
// advances a fake clock in Sleep and may return the same Store from every Open; a Redis backend opens
// a new client of one server in each Open and really sleeps in Sleep.
//
// The suite is written to run against a shared, long-lived server. It never assumes an empty backend
// and never deletes or flushes anything: each subtest uses its own random keys, all beginning with
// "rl:limittest:", and every key it writes expires on its own — after at most two minutes (a sliding
// window's units weigh for two of its windows), except a few small keys that live at most
// [admit.MaxPeriod] (fixed windows of that length, from the first admission or aligned, and GCRA
// buckets that take that long to empty) or two of it (a sliding window of that length). Subtests run
// one after the other; the whole suite lets about 16 seconds of Backend time pass (real time, for
// a real-time backend), and a few more when a case of aligned windows waits for the next minute.
//
// The suite asserts decisions, never how long a call takes. Where a real-time backend lets time
// pass between calls, durations are checked within a slack of a quarter of the window; on a fake
// clock the results are exact. A case whose expectations need its calls to come little later than
// it asks measures, by the real clock, the time that may have passed between them, and starts
// again on new keys when the machine was too slow (a few times at most, then it fails). Windows aligned to the clock (admit.Limit.Aligned, and every sliding
// window's) end at instants the suite does not choose: their cases learn where they are in a window
// from a Decision's ResetAfter, and check the Decision exactly there; an aligned fixed window's cases
// also check the windows' ends against the Backend's clock when the Backend is a
// [ClockBackend].
package limittest
