// Command frontends answers a Levee hit from Go servers that are not
// net/http, to show what the server around a cache costs on this core.
// scripts/bench-compare.sh runs it (SERVERS=... fasthttp gnet) beside the
// net/http ceiling (bench/ceiling), nginx, Varnish and Levee; it is not
// part of Levee and not in Levee's module (this directory is its own
// module, so Levee's go.mod stays free of both servers).
//
// Data flow: at start, fetch -from once (the benchmark's hot key through
// the demo upstream) and keep its body and the headers a Levee hit
// carries (the same set as bench/ceiling); then, per request:
//
//   - fasthttp: github.com/valyala/fasthttp, a goroutine per connection
//     like net/http, but parsing into reused buffers without allocating;
//     the handler sets the prepared header pairs and the body.
//   - gnet: github.com/panjf2000/gnet/v2, one epoll event loop on one
//     thread, as nginx runs. gnet has no HTTP layer: this server counts
//     the complete request heads ("\r\n\r\n") in what arrived and writes
//     one prepared answer for each (its Date redone once a second). It
//     is not an HTTP server (no bodies, no parsing, no errors): it is the
//     floor of what an event loop costs, to set against nginx.
package main
