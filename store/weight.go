package store

import (
	"math/bits"
	"net/http"
	"unsafe"
)

// An entry's weight is what it costs on the heap as the cache keeps it
// (packed, see pack.go), so that cache.max_bytes bounds memory and
// levee_cache_bytes can be read against the process's RSS. Each part is
// counted at the size its allocation really takes, and the constants
// below were checked against runtime.MemStats by BenchmarkCacheMemory
// (200,000 entries shaped like the demo upstream's 1 KiB answers: the
// weight comes within a few percent of the heap they hold).

// entryBytes is the Entry struct as allocated.
var entryBytes = allocSize(int(unsafe.Sizeof(Entry{})))

// nodeBytes is what otter spends per entry beyond key and value: its node
// (key, value, the two list links of its eviction and expiry orders, the
// expiry time, the weight), the node's share of the hash table's 64-byte
// buckets and of the frequency sketch. Measured, not derived.
const nodeBytes = 112

// Go's maps since 1.24 are Swiss tables (internal/runtime/maps): a map
// header, and groups of 8 slots, each group a control word and 8 key and
// value pairs; a table holds at most 7/8 of its slots and a map of over 8
// names has a directory of tables.
const (
	mapHeaderBytes  = 48
	headerSlotBytes = int(unsafe.Sizeof("")) + int(unsafe.Sizeof([]string(nil)))
	groupBytes      = 8 + 8*headerSlotBytes
	tableBytes      = 48 + 16 // a table and its directory slot
)

// mapBytes is a header map of n names, made with n as its size hint.
func mapBytes(n int) int64 {
	switch {
	case n == 0:
		return allocSize(mapHeaderBytes)
	case n <= 8:
		return allocSize(mapHeaderBytes) + allocSize(groupBytes)
	}
	slots := 1 << bits.Len(uint((n*8+6)/7-1)) // n at 7/8 load, a power of two
	return allocSize(mapHeaderBytes) + tableBytes + allocSize(slots/8*groupBytes)
}

// headerBytes is h packed: its map, one slice of all its values and one
// string of their bytes. Names are interned, shared by every entry, and
// not counted.
func headerBytes(h http.Header) int64 {
	if h == nil {
		return 0
	}
	n, size := headerCounts(h)
	return mapBytes(len(h)) + allocSize(n*int(unsafe.Sizeof(""))) + allocSize(size)
}

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
