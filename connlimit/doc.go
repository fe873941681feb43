// Package connlimit bounds what clients' connections can hold of an HTTP
// listener without handing its capacity to the slowest of them.
//
// A Listener never blocks Accept on a free slot (netutil.LimitListener
// did: its slots went to whoever connected first, and 1,800 slowloris
// connections kept every honest client waiting in the kernel's backlog).
// It accepts every connection and tracks each one's state through
// http.Server.ConnState and the request's body:
//
//	pending  accepted, or bytes of a next request arrived, and the request
//	         (headers and body) not yet whole: what a slow sender holds
//	active   the request arrived whole and is being served
//	idle     a keep-alive connection between requests
//
// (nginx's stub_status calls them reading, writing and waiting.) The
// pending bounds count the pending connections whose server goroutine is
// blocked reading them, waiting on their client: 2,000 honest connections
// opened at once from one address left up to 1,425 pending at once, their
// requests unread in the kernel while the server caught up, and none of
// that is the clients' doing. Below, pending means those, waiting. A new
// connection, or a pending one, may close others, oldest first, as the
// table decides (table.go):
//
//   - an address at MaxPendingPerIP loses its oldest pending connection
//     if that one is older than PressureTimeout (nginx limit_conn per
//     address, HAProxy's src_conn_cur rules): one client's slow
//     connections are recycled for its own new ones;
//   - at MaxPending, the address holding the most pending connections
//     loses its oldest one: a client with one connection is never the
//     victim of another's flood. When that address is the new
//     connection's own and its oldest is young, the new one is refused
//     instead: a young connection cannot be told from an honest one, and
//     a refusal costs an accept and a reset where an exchange would cost
//     a served connection's setup each time the flood dials again;
//   - while more than MaxPending/2 connections are pending, one pending
//     longer than PressureTimeout is closed (Envoy's overload manager,
//     reduce_timeouts: shorter timeouts under pressure). An honest client
//     sends its headers in milliseconds; a slowloris connection is old;
//   - at MaxConns, the oldest idle keep-alive connection is closed to make
//     room (nginx's ngx_drain_connections reuses idle keep-alive
//     connections when it runs out); with none idle, the oldest pending
//     connection of the address holding the most; with none pending, the
//     new connection is refused. An active connection is never closed for
//     room.
//
// Every connection closed by these limits, and every one whose request
// did not arrive within the server's ReadTimeout or whose answer could not
// be written within its WriteTimeout, is reset (SO_LINGER 0, as nginx's
// reset_timedout_connection does): its buffers are freed at once instead
// of lingering in FIN_WAIT with unsent data. Stats counts connections by
// state and closes by reason; a log line, at most one a second, says when
// the limits act.
package connlimit
