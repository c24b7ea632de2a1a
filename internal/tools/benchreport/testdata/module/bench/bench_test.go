package bench

import "testing"

// BenchmarkInProcess_Memstore runs admit's memstore on many keys or one hot key.
func BenchmarkInProcess_Memstore(b *testing.B) {}

// BenchmarkInProcess_ReferenceShardedMap is the in-process reference, a bare sharded map.
func BenchmarkInProcess_ReferenceShardedMap(b *testing.B) {}

// A doc comment that does not start with the function's name.
func BenchmarkScriptCost_ReferenceMinimal(b *testing.B) {}
