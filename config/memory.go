package config

// A node in a container sizes itself from the container's memory limit
// (cgroup v2 memory.max, or v1's memory.limit_in_bytes, read by package
// memlimit), as Go's GC guide
// advises for GOMEMLIMIT (go.dev/doc/gc-guide, "Memory limit"): leave the
// runtime a margin under the hard limit for what it does not count.

// ContainerShare is the part of a container's memory limit, in tenths,
// that a node takes as its runtime memory limit: the rest is room for
// what the Go runtime does not count (its own structures beyond the heap,
// thread stacks) and for the data dir's page cache charged to the
// container.
const ContainerShare = 9

// DefaultCacheBytes is cache.max_bytes's default.
const DefaultCacheBytes ByteSize = 256 << 20

// MinFittedCacheBytes is the least cache.max_bytes a container's limit
// fits: below it the limit leaves no room for a cache and is left to the
// memory limit alone.
const MinFittedCacheBytes = 16 << 20

// FitMemory applies a container's memory limit, in bytes (0 or less:
// none), to what the node may use. Call it after the overrides and
// before Validate; it changes only what is not configured:
//
//   - the derived node.memory_limit is at most ContainerShare tenths of
//     the container's limit (EffectiveMemoryLimit);
//   - cache.max_bytes, when left at its default (DefaultCacheBytes),
//     becomes what that share (or a set node.memory_limit, if lower)
//     holds once the near cache, a quarter of
//     collection headroom and memoryLimitSlack are taken out (the inverse
//     of the derived memory limit), and at least MinFittedCacheBytes.
//
// Any other cache.max_bytes is kept as it is, whatever the container
// allows: the operator has chosen. (The default is recognised by its
// value: one set to exactly 256MiB follows the container too.)
func (c *Config) FitMemory(container int64) {
	if container <= 0 {
		return
	}
	c.Node.container = container
	if c.Cache.MaxBytes != DefaultCacheBytes {
		return
	}
	share := container / 10 * ContainerShare
	if set := c.Node.MemoryLimit.Int64(); set > 0 {
		share = min(share, set) // the cache must fit the limit the operator set
	}
	c.Cache.MaxBytes = ByteSize(max((share-memoryLimitSlack)/5*4-max(c.Cluster.NearCache.MaxBytes.Int64(), 0), MinFittedCacheBytes))
}

// containerLimit is the runtime memory limit a container allows: its
// share of the container's limit, or 0 when there is none.
func (n Node) containerLimit() int64 {
	if n.container <= 0 {
		return 0
	}
	return n.container / 10 * ContainerShare
}
