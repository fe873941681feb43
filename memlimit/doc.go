// Package memlimit reads the memory limit of the cgroup v2 the process
// runs in, so that a node in a container sizes its cache and tells the Go
// runtime its limit (GOMEMLIMIT) from the container's, instead of growing
// until the kernel's OOM killer ends it.
//
// Data flow: cmd/node calls [Cgroup] on the real file system at start;
// config.Config.FitMemory turns the limit into node.memory_limit and,
// when it is not configured, cache.max_bytes. [Cgroup] reads
// /proc/self/cgroup for the process's cgroup path ("0::/path"), then the
// memory.max of that cgroup and of each one above it up to
// /sys/fs/cgroup: the lowest is the limit (a parent's limit binds its
// children). The file system is an fs.FS, so tests hand it fake files.
//
// Without a cgroup v2 limit, cgroup v1's memory controller is read the
// same way (memory.limit_in_bytes under /sys/fs/cgroup/memory): Docker
// on a v1 host. Outside any limit ("max", or v1's largest value) there is
// none.
package memlimit
