// Command ceiling is Go's ceiling for a cache hit: a bare net/http server
// that answers every request with one constant body and the headers a
// Levee hit carries, doing nothing else. scripts/bench-compare.sh runs it
// beside nginx, Varnish and Levee, so each can be read as a fraction of
// what net/http itself serves on the same core.
//
// Data flow: at start, fetch -from once (the demo upstream's answer for
// the benchmark's hot key) and keep its body and its cacheable headers,
// adding the ones a hit adds (Age, Cache-Status, X-Cache); without -from,
// a generated JSON body of -size bytes. Per request: copy the prepared
// header slices into the response's map and write the body. Date comes
// from net/http, as it does for Levee.
package main
