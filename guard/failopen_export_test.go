package guard

// TrackedTokens returns the number of degraded leases and reservations f remembers: the size of its
// token table, which FailOpenOptions.MaxEntries caps.
func (f *FailOpen) TrackedTokens() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tokens)
}
