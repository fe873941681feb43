package queue

import (
	"testing"
)

func FuzzDecodeCommand(f *testing.F) {
	seeds := validCommands()
	seeds["evicting enqueue"] = evictingEnqueue(jobID(9), sec(40), 5, testMaxBytes)
	for _, c := range seeds {
		b, err := c.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xc1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommand(data)
		if err != nil {
			return
		}
		b, err := c.Encode()
		if err != nil {
			t.Fatalf("an accepted command does not encode: %v", err)
		}
		again, err := DecodeCommand(b)
		if err != nil {
			t.Fatalf("a re-encoded command does not decode: %v", err)
		}
		tb := NewTable()
		tb.Apply(c)
		if s := tb.Stats(); s.Jobs > 1 || s.Bytes < 0 {
			t.Fatalf("one command made %+v", s)
		}
		if again.Op != c.Op || again.ID != c.ID || again.At != c.At {
			t.Fatalf("re-encoded %+v as %+v", c, again)
		}
		NewTable().Apply(again)
	})
}

func FuzzRestore(f *testing.F) {
	snap, err := fullTable(f).Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(snap)
	f.Add([]byte{0xc1})
	f.Add([]byte{0x82, 0xa1, 'v', 0x01, 0xa4, 'j', 'o', 'b', 's', 0xdd, 0xff, 0xff, 0xff, 0xff}) // claims 4G jobs
	f.Fuzz(func(t *testing.T, data []byte) {
		tb := NewTable()
		if err := tb.Restore(data); err != nil {
			return
		}
		s := tb.Stats()
		if s.Jobs > MaxJobs || s.Bytes < 0 {
			t.Fatalf("restored %+v", s)
		}
		if _, err := tb.Snapshot(); err != nil {
			t.Fatalf("Snapshot of a restored table: %v", err)
		}
	})
}
