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
// The suite may run against a shared, long-lived server: it never assumes an empty backend, never
// deletes or flushes anything, uses random keys of its own beginning with "rl:limittest:", and every
// key it writes expires on its own. It asserts decisions, never how long a call takes. How long its
// keys live, how much time it lets pass, and how it checks a real-time backend:
// docs/development.md#the-conformance-suite-on-a-real-backend.
package limittest
