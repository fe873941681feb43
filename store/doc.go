// Package store holds Levee's cached upstream answers and coalesces the
// fetches that fill them.
//
// It owns three things:
//
//   - [Entry], one immutable cached answer with its three time windows
//     (fresh, stale, stale-if-error) and the arithmetic on them:
//     [Entry.Freshness], [Entry.Age], [Entry.Renewed] for a 304.
//   - [Cache], a byte-weighted cache of entries (otter underneath). It keeps
//     each entry as a [Record] (record.go): a small fixed index record and
//     one immutable, pointer-free buffer holding the pre-encoded header and
//     the body, which weighs what it takes on the heap: [Entry.Size], its
//     key and otter's node (weight.go). [Cache.Get] decodes a record into
//     an Entry; [Cache.Record] hands a fresh hit the record itself, whose
//     header is copied into the answer without a map in between. Past
//     [Config.MaxBytes] the least valuable entries are evicted, and an
//     entry is dropped on its own once it is Dead (past all of its windows).
//   - Tombstones: [Cache.Invalidate] is a write's removal of a URL. It
//     leaves a tombstone versioned by the write's time, bounded in number
//     and expiring, so that until it ends no copy stored before the write
//     (a late replication push, a hand-off, a recovered copy) is stored or
//     served again, while a fetch after the write is kept as usual. Keys are
//     NUL-separated paths: a tombstone covers its key and every key below it.
//     [Cache.Purge] is an operator's removal of keys (a URL, or a whole
//     route): the same tombstones, and the entries below them freed at once
//     by a walk over the cache.
//   - [Group], the in-flight map: concurrent fetches of one key collapse into
//     one run of the fetch function, whether the first caller is a client's
//     miss ([Group.Do]) or a background refresh ([Group.Start]).
//
// Data flow, as the proxy engine drives it: the engine builds the key and
// calls [Cache.Get]. A Fresh entry is served as is. A Stale one is served
// while [Group.Start] runs one refresh, which ends in [Cache.Set]. A miss (or
// an Expired entry) goes through [Group.Do], whose single fetch also ends in
// [Cache.Set]; an Expired entry is still served if that fetch fails.
//
// The package knows nothing about HTTP routes, breakers or the cluster: the
// engine decides keys and window lengths; store keeps entries and flights.
package store
