package budget

import (
	"errors"
	"testing"
	"time"
)

func asRefused(err error, re **RefusedError) bool { return errors.As(err, re) }

// FuzzDecodeReport: outside bytes never crash the decoder, and what it
// accepts applies and snapshots cleanly.
func FuzzDecodeReport(f *testing.F) {
	good, _ := Report{V: CommandVersion, Host: apiHost, Node: "n1", At: 1, Period: int64(time.Second), Sent: 3, Wanted: 4, Ceiling: 10, Floor: 1, Members: 3}.Encode()
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReport(b)
		if err != nil {
			return
		}
		tab := NewTable()
		tab.Apply(r)
		snap, err := tab.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if err := NewTable().Restore(snap); err != nil {
			t.Fatalf("a table's own snapshot does not restore: %v", err)
		}
	})
}

// FuzzRestore: a corrupt snapshot is an error, never a crash, and a
// restored table takes reports.
func FuzzRestore(f *testing.F) {
	tab := NewTable()
	tab.Apply(Report{V: CommandVersion, Host: apiHost, Node: "n1", At: 1, Period: int64(time.Second), Sent: 3, Lost: 1, Wanted: 4, Ceiling: 10, Floor: 1, Members: 3})
	snap, _ := tab.Snapshot()
	f.Add(snap)
	f.Add([]byte{0x81, 0xa1, 'v', 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		tab := NewTable()
		if tab.Restore(b) != nil {
			return
		}
		tab.Apply(Report{V: CommandVersion, Host: apiHost, Node: "n2", At: 2, Period: int64(time.Second), Sent: 1, Wanted: 1, Ceiling: 10, Floor: 1, Members: 3})
		_, _, _ = tab.Lease(apiHost, "n2", time.Unix(0, 2))
	})
}
