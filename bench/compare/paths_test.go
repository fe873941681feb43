package main

import (
	"strings"
	"testing"
)

func TestEveryKeyHasTheSameLength(t *testing.T) {
	cold, err := coldPath("r3-cluster")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{keyPath(0), keyPath(maxKeys - 1), cold} {
		if len(p) != len(keyPath(0)) {
			t.Errorf("%s: %d bytes, want %d", p, len(p), len(keyPath(0)))
		}
	}
}

func TestColdPathRejectsNamesTheUpstreamWouldNot(t *testing.T) {
	tests := []struct {
		name string
		key  string
	}{
		{"slash", "r1/nginx"},
		{"space", "r1 nginx"},
		{"too long", strings.Repeat("a", idLen-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := coldPath(tt.key); err == nil {
				t.Fatalf("coldPath(%q) = %s, want an error", tt.key, p)
			}
		})
	}
}

func TestLuaScriptBuildsKeyPathsPieces(t *testing.T) {
	s := luaScript(10000)
	for _, want := range []string{`string.format("k%05d", i)`, `"` + keyPad + `"`, "math.random(10000)", "for i = 0, 10000 - 1 do"} {
		if !strings.Contains(s, want) {
			t.Errorf("lua script lacks %q:\n%s", want, s)
		}
	}
}
