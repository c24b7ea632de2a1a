package memstore

import "testing"

// BenchmarkTake measures Store.Take over many keys.
//
// This second paragraph is not shown.
func BenchmarkTake(b *testing.B) {}

// BenchmarkReferenceShardedMap is the reference: a bare map in 64 shards, each behind a mutex,
// with the same keys.
func BenchmarkReferenceShardedMap(b *testing.B) {}

func BenchmarkTakeHotKey(b *testing.B) {} // no doc comment: no note

// BenchmarkKeyMemory reports the live heap per key. The docs quote it:
//
//	go test -run '^$' -bench KeyMemory -benchtime 1x ./memstore
func BenchmarkKeyMemory(b *testing.B) {}
