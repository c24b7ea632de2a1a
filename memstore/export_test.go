package memstore

// Sweep runs one pass of the sweeper of s now, as its ticker would, and returns how many entries it
// examined and removed. It exists for the tests and benchmarks of package memstore_test, so that a
// test on a fake clock decides when the sweeper runs.
func Sweep(s *Store) (examined, removed int) { return s.sweep() }
