// Package hostkey owns the one rule that names an upstream host: its
// origin, scheme://host:port, lower case, with the default port made
// explicit, so "https://API.example.com" and "https://api.example.com:443"
// are one host. upstream keys its per-host caps and pauses by it, config
// matches a hosts: entry to the routes that call its host by it, and the
// pauses in the Raft log carry it. It is a leaf: the standard library only.
package hostkey
