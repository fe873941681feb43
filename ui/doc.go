// Package ui is Levee's operator page: one HTML page, served by every node
// at /-/ui/ (on the admin port when node.admin is set), that shows the
// cluster as this node sees it.
//
// It owns rendering, and which hosts and routes a section lists. What it
// shows comes from a Source, a struct of narrow functions the node fills
// in (the /-/cluster document, the routes, the committed breaker views,
// each upstream host's counters, pause and limits, the queue's stats, the
// cache's); the package holds no pointer to a node and reads no metric by
// name. The one piece of state it keeps is History, the last
// transitions of each route's breaker, which the node feeds from the
// breaker table's transition callback.
//
// Data flow:
//
//	Source ─► snapshot() ─► State ─┬─► page.html (html/template) GET /-/ui/
//	                               └─► JSON                      GET /-/ui/state.json
//
// The page reads without JavaScript: every section is rendered on the
// server. With JavaScript, app.js (embedded, same origin, no inline script:
// the Content-Security-Policy forbids it) fetches the page again every 2 s
// and swaps the live sections in place, so there is one renderer, and it
// turns the counters the page carries (data-counter) into rates from the
// difference between two polls. The dead-letter list and its replay
// buttons are the script's too: listing dead jobs and replaying them need
// the admin token, which the operator types into the page; it is kept in
// sessionStorage and sent as a bearer token to the ordinary JSON API
// (/-/jobs?state=dead, /-/jobs/{id}/replay), never to or from this
// package. Without JavaScript the page prints the curl commands instead.
package ui
