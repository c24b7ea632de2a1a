package memstore

import (
	"runtime"
	"sync"
	"time"
)

// liveExaminedPerInsert is k, the live entries an insert steps past to pay for reclaim. A shard then
// holds at most about k/(k−1) times its live entries; 2 means twice, for little work per insert.
const liveExaminedPerInsert = 2

// sweep examines every entry of every shard, removes those whose window has ended, and returns how
// many entries it examined and removed; then it removes the expired Overrides (tidyOverrides).
func (t *table) sweep() (examined, removed int) {
	for i := range t.shards {
		e, r := t.shards[i].sweep(t.now)
		examined += e
		removed += r
	}
	t.tidyOverrides()
	return examined, removed
}

// makeRoom pays for one new entry: it reclaims from the cursor until it has stepped past
// liveExaminedPerInsert live entries, and, if the shard is still full, examines up to sh.budget more.
// It reports whether the shard has room for the entry. It never removes a live entry. The caller
// holds sh.mu.
func (sh *shard) makeRoom(now time.Duration) bool {
	sh.reclaim(now, liveExaminedPerInsert, sh.budget)
	if len(sh.entries) < sh.capacity {
		return true
	}
	sh.reclaim(now, sh.budget, sh.budget)
	return len(sh.entries) < sh.capacity
}

// reclaim walks the entries from the cursor on, wrapping around, and removes those whose window has
// ended at now, until it has stepped past maxLive live entries (at most as many as the shard holds)
// or removed maxExpired. Then it rebuilds the shard if it has shrunk. It returns how many entries it
// examined and removed. The caller holds sh.mu.
func (sh *shard) reclaim(now time.Duration, maxLive, maxExpired int) (examined, removed int) {
	maxLive = min(maxLive, len(sh.entries))
	for live := 0; live < maxLive && removed < maxExpired && len(sh.entries) > 0; examined++ {
		if sh.cursor >= len(sh.entries) {
			sh.cursor = 0
		}
		if sh.entries[sh.cursor].deadline <= now {
			sh.remove(sh.cursor) // the last entry moves here, and is examined next
			removed++
		} else {
			sh.cursor++
			live++
		}
	}
	sh.shrinkIfSparse()
	return examined, removed
}

// sweep examines every entry the shard holds when it starts, removes those whose window has ended at
// now(), and then rebuilds the shard if it has shrunk. It takes sh.mu for at most sh.budget entries
// at a time, so a Take waits for one such step at most. Entries inserted during the sweep, and any
// an insert moves between two steps, wait for the next one. It returns how many entries it examined
// and removed.
func (sh *shard) sweep(now func() time.Duration) (examined, removed int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	end := len(sh.entries)
	for pos := 0; ; {
		var e, r int
		pos, e, r = sh.sweepFrom(pos, end, sh.at(now()), sh.budget)
		examined, removed = examined+e, removed+r
		if pos >= min(end, len(sh.entries)) {
			sh.shrinkIfSparse()
			return examined, removed
		}
		sh.mu.Unlock()
		runtime.Gosched() // let the Takes waiting for the lock have it
		sh.mu.Lock()
	}
}

// sweepFrom examines up to budget entries from position pos on, up to position end, and removes
// those whose window has ended at now. It returns the position to go on from and how many entries
// it examined and removed. The caller holds sh.mu.
func (sh *shard) sweepFrom(pos, end int, now time.Duration, budget int) (next, examined, removed int) {
	for ; examined < budget && pos < min(end, len(sh.entries)); examined++ {
		if sh.entries[pos].deadline <= now {
			sh.remove(pos) // another entry moves here (the last, or one behind the cursor), examined next
			removed++
		} else {
			pos++
		}
	}
	return pos, examined, removed
}

// Below this many entries a shard's storage is never rebuilt.
const minRebuild = 1024

// shrinkIfSparse rebuilds the shard's storage once it holds a quarter of its peak or less: Go maps
// never shrink by themselves. The caller holds sh.mu.
func (sh *shard) shrinkIfSparse() {
	if sh.peak >= minRebuild && len(sh.entries) <= sh.peak/4 {
		sh.rebuild()
	}
}

// A sweeper is the background goroutine of a Store.
type sweeper struct {
	once sync.Once
	stop chan struct{} // closed to stop the goroutine
	done chan struct{} // closed by the goroutine when it returns
}

func (sw *sweeper) run(tab *table, interval time.Duration) {
	defer close(sw.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-sw.stop:
			return
		case <-tick.C:
			tab.sweep()
		}
	}
}

// signal tells the goroutine to stop, without waiting. It is idempotent.
func (sw *sweeper) signal() { sw.once.Do(func() { close(sw.stop) }) }

// close stops the goroutine and waits for it to return. It is idempotent.
func (sw *sweeper) close() {
	sw.signal()
	<-sw.done
}
