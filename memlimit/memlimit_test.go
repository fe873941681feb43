package memlimit

import (
	"testing"
	"testing/fstest"
)

func TestParseMax(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   int64
		wantOK bool
	}{
		{"a limit", "1073741824\n", 1 << 30, true},
		{"no newline", "536870912", 512 << 20, true},
		{"no limit", "max\n", 0, false},
		{"empty", "", 0, false},
		{"zero", "0\n", 0, false},
		{"negative", "-1\n", 0, false},
		{"not a number", "1G\n", 0, false},
		{"past int64", "9223372036854775808\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseMax([]byte(tt.in))
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseMax(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestUnifiedPath(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   string
		wantOK bool
	}{
		{"container root", "0::/\n", "/", true},
		{"nested", "0::/system.slice/docker-abc.scope\n", "/system.slice/docker-abc.scope", true},
		{"hybrid: v1 lines first", "12:memory:/x\n1:name=systemd:/y\n0::/user.slice\n", "/user.slice", true},
		{"v1 only", "12:memory:/docker/abc\n", "", false},
		{"cleaned", "0::/a/../b//c/\n", "/b/c", true},
		{"relative is refused", "0::a\n", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := UnifiedPath([]byte(tt.in))
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("UnifiedPath(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestCgroupTakesTheLowestLimitOnThePath(t *testing.T) {
	self := func(p string) *fstest.MapFile { return &fstest.MapFile{Data: []byte("0::" + p + "\n")} }
	max := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s + "\n")} }
	tests := []struct {
		name   string
		fs     fstest.MapFS
		want   int64
		wantOK bool
	}{
		{"container: its own root", fstest.MapFS{"proc/self/cgroup": self("/"), "sys/fs/cgroup/memory.max": max("1073741824")}, 1 << 30, true},
		{"no limit anywhere", fstest.MapFS{"proc/self/cgroup": self("/a"), "sys/fs/cgroup/a/memory.max": max("max")}, 0, false},
		{"the parent's is lower", fstest.MapFS{"proc/self/cgroup": self("/a/b"),
			"sys/fs/cgroup/a/b/memory.max": max("4294967296"), "sys/fs/cgroup/a/memory.max": max("2147483648")}, 2 << 30, true},
		{"the child's is lower", fstest.MapFS{"proc/self/cgroup": self("/a/b"),
			"sys/fs/cgroup/a/b/memory.max": max("536870912"), "sys/fs/cgroup/a/memory.max": max("max")}, 512 << 20, true},
		{"root cgroup has no memory.max", fstest.MapFS{"proc/self/cgroup": self("/")}, 0, false},
		{"no /proc/self/cgroup", fstest.MapFS{"sys/fs/cgroup/memory.max": max("1073741824")}, 0, false},
		{"cgroup v1 without a limit file", fstest.MapFS{"proc/self/cgroup": max("4:memory:/docker/x")}, 0, false},
		{"cgroup v1 container: its own cgroup at the mount's root", fstest.MapFS{"proc/self/cgroup": max("4:memory:/docker/x\n0::/"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": max("1073741824")}, 1 << 30, true},
		{"cgroup v1 unlimited", fstest.MapFS{"proc/self/cgroup": max("4:cpu,memory:/a"),
			"sys/fs/cgroup/memory/a/memory.limit_in_bytes": max("9223372036854771712")}, 0, false},
		{"cgroup v2 wins over v1", fstest.MapFS{"proc/self/cgroup": max("4:memory:/a\n0::/"),
			"sys/fs/cgroup/memory.max": max("536870912"), "sys/fs/cgroup/memory/memory.limit_in_bytes": max("1073741824")}, 512 << 20, true},
		{"unreadable limit is skipped", fstest.MapFS{"proc/self/cgroup": self("/a"),
			"sys/fs/cgroup/a/memory.max": max("lots"), "sys/fs/cgroup/memory.max": max("1073741824")}, 1 << 30, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Cgroup(tt.fs)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Cgroup = %d, %v; want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestMemoryV1Path(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   string
		wantOK bool
	}{
		{"alone", "4:memory:/docker/abc\n", "/docker/abc", true},
		{"with others", "3:cpuacct,memory:/x/\n", "/x", true},
		{"named hierarchy is not it", "1:name=memory:/y\n", "", false},
		{"v2 only", "0::/\n", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := MemoryV1Path([]byte(tt.in))
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("MemoryV1Path(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
