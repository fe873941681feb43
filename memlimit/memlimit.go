package memlimit

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Cgroup returns the memory limit, in bytes, of the cgroup v2 the process
// runs in, read from fsys (rooted at "/": os.DirFS("/") in production),
// and whether there is one. See the package doc.
func Cgroup(fsys fs.FS) (int64, bool) {
	self, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	dir, ok := UnifiedPath(self)
	if !ok {
		return 0, false
	}
	var limit int64
	found := false
	for d := dir; ; d = path.Dir(d) {
		if b, err := fs.ReadFile(fsys, path.Join("sys/fs/cgroup", d, "memory.max")); err == nil {
			if n, ok := ParseMax(b); ok && (!found || n < limit) {
				limit, found = n, true
			}
		}
		if d == "/" || d == "." {
			return limit, found
		}
	}
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
