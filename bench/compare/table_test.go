package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestRenderTableTakesMediansAndRatios(t *testing.T) {
	var rows []Row
	add := func(c, s string, rps, p99 float64, calls int) {
		rows = append(rows, Row{Case: c, Server: s, RPS: rps, P99: p99, Calls: calls})
	}
	for _, k := range []float64{0.9, 1, 1.1} { // medians: the k = 1 rounds
		add("hot", "ceiling", 80000*k, 2*k, -1)
		add("hot", "nginx", 50000*k, 1.5*k, -1)
		add("hot", "varnish", 60000*k, 2.5*k, -1)
		add("hot", "levee", 60000*k, 3*k, -1)
		add("hot", "cluster", 30000*k, 4*k, -1)
		add("cold", "nginx", 0, 600*k, 1)
	}
	add("cold", "levee", 0, 110, 1)
	add("cold", "levee", 0, 120, 2)
	add("cold", "levee", 0, 130, 1)
	got := renderTable(rows)
	for _, want := range []string{
		"| hot key | bare Go net/http (ceiling) | 80.0k | 2.00 ms | 1.33× | 1.33× | 1.00× | — | 0 |",
		"| hot key | Levee, single node | 60.0k | 3.00 ms | 1.00× | 2.00× | 0.75× | — | 0 |",
		"| 500 cold | nginx proxy_cache | — | 600 ms | — | 1.00× | — | 1 | 0 |",
		"| 500 cold | Levee, single node | — | 120 ms | — | 0.20× | — | 1 (1–2) | 0 |",
		"Levee, 3 nodes ÷ single node (req/s): hot key 0.50×.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "| hot key |") > strings.Index(got, "| 500 cold |") {
		t.Errorf("cases out of order:\n%s", got)
	}
}

func TestRowsRoundTripThroughTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.tsv")
	want := []Row{
		{Case: "hot", Server: "nginx", Round: 1, RPS: 52600.5, P99: 1.65, Calls: -1},
		{Case: "cold", Server: "cluster", Round: 3, P99: 161.25, Calls: 1, Errors: 2},
	}
	for _, r := range want {
		if err := appendRow(path, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readRows(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
