package store

import "math/bits"

// An entry's weight is what it costs on the heap as the cache keeps it
// (a Record, see record.go), so that cache.max_bytes bounds memory and
// levee_cache_bytes can be read against the process's RSS: the record, its
// buffer, the key and otter's node, each counted at the size its
// allocation really takes. BenchmarkCacheMemory checks the sum against
// runtime.MemStats (200,000 entries shaped like the demo upstream's 1 KiB
// answers).

// nodeBytes is what otter spends per entry beyond key and value: its node
// (key, value, the two list links of its eviction and expiry orders, the
// expiry time, the weight), the node's share of the hash table's 64-byte
// buckets and of the frequency sketch. Measured, not derived.
const nodeBytes = 112

// allocSize is the memory Go's allocator hands out for an n-byte object.
// Below 32 KiB objects are rounded up to a size class, and the classes are
// spaced so that none wastes more than 1/8 (runtime/sizeclasses.go): n is
// rounded up to an eighth of the power of two below it, which matches the
// classes from 128 bytes to 2 KiB and overshoots a little above. Larger
// objects take whole 8 KiB pages.
func allocSize(n int) int64 {
	switch {
	case n <= 0:
		return 0
	case n <= 16:
		return 16
	case n <= 128:
		return roundUp(n, 16)
	case n > 32<<10:
		return roundUp(n, 8<<10)
	}
	return roundUp(n, 1<<(bits.Len(uint(n-1))-1)/8)
}

func roundUp(n, step int) int64 {
	return int64((n + step - 1) / step * step)
}
