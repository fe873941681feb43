package cachefile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"

	"github.com/levee/levee/peer"
)

// magic opens every cache file; the last byte is the format version.
const magic = "LEVEE-CACHE\x00\x01\n"

// ErrCorrupt wraps every error about the file's content (as opposed to
// errors opening or reading it).
var ErrCorrupt = errors.New("cachefile: corrupt cache file")

// Save writes entries to path atomically: a temporary file in the same
// directory, fsynced, then renamed over path, then the directory fsynced.
// It returns how many entries were written. With no entries it removes
// path instead, so a later Load does not bring back an older cache.
func Save(path string, entries iter.Seq[*peer.Entry]) (n int, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return 0, fmt.Errorf("cachefile: %w", err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, fmt.Errorf("cachefile: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if n, err = write(tmp, entries); err != nil {
		return 0, err
	}
	if n == 0 {
		tmp.Close()
		os.Remove(tmp.Name())
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("cachefile: %w", err)
		}
		return 0, nil
	}
	if err = tmp.Sync(); err != nil {
		return 0, fmt.Errorf("cachefile: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return 0, fmt.Errorf("cachefile: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return 0, fmt.Errorf("cachefile: %w", err)
	}
	return n, syncDir(dir)
}

func write(f *os.File, entries iter.Seq[*peer.Entry]) (int, error) {
	w := bufio.NewWriterSize(f, 256<<10)
	if _, err := w.WriteString(magic); err != nil {
		return 0, fmt.Errorf("cachefile: %w", err)
	}
	n := 0
	var hdr [binary.MaxVarintLen64]byte
	for e := range entries {
		e.V = peer.Version
		b, err := peer.Encode(e)
		if err != nil {
			return 0, fmt.Errorf("cachefile: encode %q: %w", e.Key, err)
		}
		if len(b) > peer.MaxMessage {
			continue // never readable back; such an entry cannot be cached anyway
		}
		w.Write(hdr[:binary.PutUvarint(hdr[:], uint64(len(b)))])
		if _, err := w.Write(b); err != nil {
			return 0, fmt.Errorf("cachefile: %w", err)
		}
		n++
	}
	if err := w.Flush(); err != nil {
		return 0, fmt.Errorf("cachefile: %w", err)
	}
	return n, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cachefile: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cachefile: sync %s: %w", dir, err)
	}
	return nil
}

// Load reads path and calls fn with each entry in file order. A missing
// file is no error (n = 0). A damaged file yields the entries before the
// damage and an error wrapping ErrCorrupt.
func Load(path string, fn func(*peer.Entry)) (n int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cachefile: %w", err)
	}
	defer f.Close()
	return Read(f, fn)
}

// Read is Load on a reader: it decodes frames until EOF, calling fn with
// each entry, and stops at the first damaged one.
func Read(r io.Reader, fn func(*peer.Entry)) (n int, err error) {
	br := bufio.NewReaderSize(r, 256<<10)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(br, head); err != nil || string(head) != magic {
		return 0, fmt.Errorf("%w: not a Levee cache file (bad header)", ErrCorrupt)
	}
	for {
		size, err := binary.ReadUvarint(br)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil || size == 0 || size > peer.MaxMessage {
			return n, fmt.Errorf("%w: bad frame length after %d entries", ErrCorrupt, n)
		}
		// Read as it comes: a damaged length must not allocate 64 MiB on
		// its word alone, as a peer's may not (peer.ReadBody).
		b, err := peer.ReadBody(io.LimitReader(br, int64(size)), int64(size))
		if err != nil || uint64(len(b)) != size {
			return n, fmt.Errorf("%w: truncated after %d entries", ErrCorrupt, n)
		}
		var e peer.Entry
		if err := peer.Decode(b, &e); err != nil {
			return n, fmt.Errorf("%w: entry %d: %w", ErrCorrupt, n+1, err)
		}
		fn(&e)
		n++
	}
}
