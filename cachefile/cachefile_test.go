package cachefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/levee/levee/peer"
)

func entries(n int) []*peer.Entry {
	var out []*peer.Entry
	for i := range n {
		out = append(out, &peer.Entry{Key: string(rune('a' + i)), Status: 200, StoredAt: int64(i + 1),
			FreshUntil: 10, StaleUntil: 20, ErrorUntil: 30, Header: map[string][]string{"Etag": {"x"}}, Body: []byte{byte(i)}})
	}
	return out
}

func keysOf(t *testing.T, path string) ([]string, error) {
	t.Helper()
	var keys []string
	_, err := Load(path, func(e *peer.Entry) { keys = append(keys, e.Key) })
	return keys, err
}

func TestSaveThenLoadRoundTrips(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "cache.snapshot")
	n, err := Save(path, slices.Values(entries(3)))
	if err != nil || n != 3 {
		t.Fatalf("Save = %d, %v", n, err)
	}
	var got []*peer.Entry
	if n, err := Load(path, func(e *peer.Entry) { got = append(got, e) }); err != nil || n != 3 {
		t.Fatalf("Load = %d, %v", n, err)
	}
	for i, e := range entries(3) {
		if got[i].Key != e.Key || got[i].StoredAt != e.StoredAt || !bytes.Equal(got[i].Body, e.Body) || got[i].Header["Etag"][0] != "x" {
			t.Fatalf("entry %d = %+v, want %+v", i, got[i], e)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp-*"))
	if len(leftovers) != 0 {
		t.Fatalf("temporary files left behind: %v", leftovers)
	}
}

func TestSaveNothingRemovesTheOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.snapshot")
	if _, err := Save(path, slices.Values(entries(2))); err != nil {
		t.Fatal(err)
	}
	if n, err := Save(path, slices.Values([]*peer.Entry(nil))); err != nil || n != 0 {
		t.Fatalf("Save(nothing) = %d, %v", n, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old file still there: %v", err)
	}
	if keys, err := keysOf(t, path); err != nil || keys != nil {
		t.Fatalf("Load of a missing file = %v, %v; want nothing, no error", keys, err)
	}
}

func TestLoadDamagedFileKeepsWhatCameBefore(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if _, err := Save(good, slices.Values(entries(3))); err != nil {
		t.Fatal(err)
	}
	whole, _ := os.ReadFile(good)
	tests := []struct {
		name     string
		content  []byte
		wantKeys []string
	}{
		{"not a cache file", []byte("hello world, not a cache"), nil},
		{"empty file", nil, nil},
		{"truncated in the last entry", whole[:len(whole)-3], []string{"a", "b"}},
		{"garbage after two entries", append(slices.Clone(whole[:len(whole)-frameLen(t, whole, 2)]), 0x05, 1, 2, 3, 4, 5), []string{"a", "b"}},
		{"huge length", append([]byte(magic), 0xff, 0xff, 0xff, 0xff, 0x7f), nil},
		{"zero length", append([]byte(magic), 0), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "bad")
			if err := os.WriteFile(path, tt.content, 0o600); err != nil {
				t.Fatal(err)
			}
			keys, err := keysOf(t, path)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if !slices.Equal(keys, tt.wantKeys) {
				t.Fatalf("keys = %v, want %v", keys, tt.wantKeys)
			}
		})
	}
}

// frameLen is the length of the last frame of a file holding n+1 entries,
// found by reading the first n.
func frameLen(t *testing.T, whole []byte, n int) int {
	t.Helper()
	var sizes []int
	rest := whole[len(magic):]
	for len(rest) > 0 {
		var e peer.Entry
		size, k := uvarint(rest)
		if err := peer.Decode(rest[k:k+int(size)], &e); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, k+int(size))
		rest = rest[k+int(size):]
	}
	return sizes[n]
}

func uvarint(b []byte) (uint64, int) {
	var x uint64
	for i, c := range b {
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, i + 1
		}
	}
	return 0, 0
}

// FuzzRead: any bytes decode to some entries and maybe ErrCorrupt, never a
// panic or an unbounded allocation.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	path := filepath.Join(f.TempDir(), "seed")
	if _, err := Save(path, slices.Values(entries(2))); err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	f.Add([]byte(magic))
	f.Add(append([]byte(magic), 3, 0x81, 0xa1, 0x76))
	buf.WriteString(magic)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Read(bytes.NewReader(b), func(e *peer.Entry) {
			if e.Key == "" {
				t.Fatal("an entry without a key was accepted")
			}
		})
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Read error %v does not wrap ErrCorrupt", err)
		}
		if n < 0 {
			t.Fatal("negative count")
		}
	})
}

// TestADamagedLengthAllocatesOnlyWhatTheFileHolds: a frame claiming
// 60 MiB in a file of a few bytes is ErrCorrupt, and reading it allocates
// about what the file holds, not what the length says.
func TestADamagedLengthAllocatesOnlyWhatTheFileHolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad")
	content := binary.AppendUvarint([]byte(magic), 60<<20)
	content = append(content, "only a few bytes"...)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := keysOf(t, path)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Fatalf("reading it allocated %d bytes", got)
	}
}
