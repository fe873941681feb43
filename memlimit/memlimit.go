package memlimit

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Cgroup returns the memory limit, in bytes, of the cgroup the process
// runs in, read from fsys (rooted at "/": os.DirFS("/") in production),
// and whether there is one: cgroup v2's, else cgroup v1's memory
// controller's (Docker on a v1 host). See the package doc.
func Cgroup(fsys fs.FS) (int64, bool) {
	self, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	if dir, ok := UnifiedPath(self); ok {
		if n, ok := lowest(fsys, "sys/fs/cgroup", dir, "memory.max", ParseMax); ok {
			return n, true
		}
	}
	if dir, ok := MemoryV1Path(self); ok {
		return lowest(fsys, "sys/fs/cgroup/memory", dir, "memory.limit_in_bytes", ParseLimitInBytes)
	}
	return 0, false
}

// lowest is the lowest limit in file of the cgroup dir under root and of
// each one above it. A path that does not exist under the mount (a v1
// container sees its own cgroup at the mount's root, under its host
// path's name) is skipped.
func lowest(fsys fs.FS, root, dir, file string, parse func([]byte) (int64, bool)) (int64, bool) {
	var limit int64
	found := false
	for d := dir; ; d = path.Dir(d) {
		if b, err := fs.ReadFile(fsys, path.Join(root, d, file)); err == nil {
			if n, ok := parse(b); ok && (!found || n < limit) {
				limit, found = n, true
			}
		}
		if d == "/" || d == "." {
			return limit, found
		}
	}
}

// MemoryV1Path returns the cgroup v1 memory controller's path in a
// /proc/self/cgroup file ("N:memory:/path", the controller possibly
// listed with others), cleaned, or false when there is none.
func MemoryV1Path(procSelfCgroup []byte) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(procSelfCgroup))
	for sc.Scan() {
		parts := strings.SplitN(strings.TrimSpace(sc.Text()), ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == "memory" {
				return path.Clean(parts[2]), true
			}
		}
	}
	return "", false
}

// ParseLimitInBytes parses a cgroup v1 memory.limit_in_bytes file. v1
// has no "max": an unlimited cgroup shows the largest page-aligned
// int64, so any value from 2^62 up counts as none.
func ParseLimitInBytes(b []byte) (int64, bool) {
	n, ok := ParseMax(b)
	if !ok || n >= 1<<62 {
		return 0, false
	}
	return n, true
}

// UnifiedPath returns the cgroup v2 path in a /proc/self/cgroup file: the
// path of its "0::" line, cleaned, or false when there is none (cgroup v1
// only). A path that climbs above the root is refused.
func UnifiedPath(procSelfCgroup []byte) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(procSelfCgroup))
	for sc.Scan() {
		p, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "0::")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		return path.Clean(p), true
	}
	return "", false
}

// ParseMax parses the content of a cgroup v2 memory.max file: a byte
// count, or "max" for none. It reports false for "max", for anything it
// cannot read, and for a limit of 0 (which no process could run in).
func ParseMax(b []byte) (int64, bool) {
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
