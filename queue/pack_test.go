package queue

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"
)

// unpackedTable is tb with every job's headers as maps, as a table that
// never packs holds them.
func unpackedTable(tb *Table) *Table {
	out := NewTable()
	for _, j := range tb.jobs {
		u := *j.unpacked()
		out.add(&u)
	}
	return out
}

// TestADoneJobsPackedHeadersReadCountAndSnapshotAsApplied: a done job's
// headers, packed in the table, read back (Job), count against MaxBytes
// and snapshot exactly as the headers it was given; a restored snapshot
// packs them again and snapshots the same bytes.
func TestADoneJobsPackedHeadersReadCountAndSnapshotAsApplied(t *testing.T) {
	for _, tt := range []struct {
		name       string
		reqHeader  http.Header
		respHeader http.Header
		packed     bool
	}{
		{"several names and values", http.Header{"Content-Type": {"application/json"}, "X-Many": {"b", "a"}, "Accept": {"*/*"}},
			http.Header{"X-Charge": {"ch_1"}, "Set-Cookie": {"a=1", "b=2"}}, true},
		{"empty headers stay empty, not nil", http.Header{}, http.Header{}, true},
		{"no answer headers", http.Header{"A": {"1"}}, nil, true},
		{"a name without values is kept as a map", http.Header{"A": {}}, http.Header{"B": {}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tb := NewTable()
			req := newReq("pay", "acme", "k1", true)
			req.Header = tt.reqHeader
			apply(t, tb, enqueue(id1, sec(0), req))
			apply(t, tb, lease(id1, "n1", sec(1), 0, sec(31)))
			fin := finish(id1, "n1", sec(2), 0, OutcomeDone, 0)
			fin.Response.Header = tt.respHeader
			apply(t, tb, fin)
			if packed := tb.jobs[id1].flat != nil; packed != tt.packed {
				t.Fatalf("packed = %v, want %v", packed, tt.packed)
			}
			j := mustJob(t, tb, id1)
			if !reflect.DeepEqual(j.Req.Header, tt.reqHeader) || !reflect.DeepEqual(j.Response.Header, tt.respHeader) {
				t.Fatalf("read back headers %#v and %#v, want %#v and %#v", j.Req.Header, j.Response.Header, tt.reqHeader, tt.respHeader)
			}
			plain := unpackedTable(tb)
			if got, want := tb.Stats().Bytes, plain.Stats().Bytes; got != want {
				t.Fatalf("packed job counts %d bytes, unpacked %d", got, want)
			}
			snap, err := tb.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			want, err := plain.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(snap, want) {
				t.Fatal("a packed table's snapshot differs from the unpacked one's")
			}
			restored := NewTable()
			if err := restored.Restore(snap); err != nil {
				t.Fatal(err)
			}
			if (restored.jobs[id1].flat != nil) != tt.packed {
				t.Fatal("a restored done job is not packed as an applied one is")
			}
			again, err := restored.Snapshot()
			if err != nil || !bytes.Equal(again, snap) {
				t.Fatalf("the restored table snapshots other bytes (%v)", err)
			}
			if restored.Stats().Bytes != tb.Stats().Bytes {
				t.Fatalf("restored table counts %d bytes, applied one %d", restored.Stats().Bytes, tb.Stats().Bytes)
			}
		})
	}
}

// TestAPackedJobsCopyDoesNotAliasTheTable: a done job read twice and
// changed by its first reader reads the same the second time.
func TestAPackedJobsCopyDoesNotAliasTheTable(t *testing.T) {
	tb := tableWith(t, Done)
	j := mustJob(t, tb, id1)
	j.Req.Header.Set("Content-Type", "text/plain")
	j.Response.Header.Set("X-Charge", "changed")
	j.Response.Body[0] = 'X'
	again := mustJob(t, tb, id1)
	if again.Req.Header.Get("Content-Type") != "application/json" || again.Response.Header.Get("X-Charge") != "ch_1" || again.Response.Body[0] != '{' {
		t.Fatalf("a copy's change reached the table: %+v %+v", again.Req.Header, again.Response)
	}
}
