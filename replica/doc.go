// Package replica owns cache replication between Levee nodes: forwarding a
// request to its key's owner (with the near cache in front), pushing stored
// entries to the key's replicas, handing entries off to members that lack
// them, and recovering a key from the other nodes when this one has nothing
// usable. It holds both halves of those node-to-node messages: the calls
// (through a Transport, *peer.Client) and the handlers for replicate,
// lookup and near-cache renewal (Server). The forward handler stays in api: it serves a request
// through the engine and maps its errors to HTTP, which is api's one job.
//
// Data flow:
//
//	api dispatch ── Owner/Forward ──► near cache ─miss─► Transport.Forward ──► owner's api
//	engine store ── OnStore ──► push queue ──► workers ── Transport.Replicate ──► replica's Server.ServeReplicate ──► Engine.Put
//	                    │ (not the owner)          │ (failed)
//	                    └──────────► hand-off set ◄┘ ── MemberUp / every HandoffInterval ──► Transport.Replicate
//	engine fetch failed ── Recover ──► Transport.Lookup (every candidate) ──► peer's Server.ServeLookup ──► Engine.Lookup
//	engine write ── OnInvalidate ──► near cache, hand-off set dropped here; tombstone owed to every member
//	                    ──► invalidation loop ── Transport.Invalidate ──► peer's Replicator.ServeInvalidate
//	                        ──► Tombstones.Invalidate (its cache), near cache, hand-off set; kept for members that come back
//	operator purge (a URL, or a whole route: proxy.RouteScope) ── Purge ──► near cache, hand-off set dropped here;
//	                    tombstone sent to every live member at once and waited for, owed to the rest as a write's
//	renewal round (every ttl/8) ── copies due, served lately ── Transport.Renew (one per owner) ──► owner's Server.ServeRenew ──► Engine.Current
//	                    ──► vouched: near copy runs a ttl more (store.Cache.Prolong); not: dropped; no answer: ends at its ttl
//
// A write's tombstone is versioned by the write's time: whatever copy of
// the URL is older (a late push, a hand-off, a recovered or near-cached
// copy) is neither stored nor served until the tombstone ends, while an
// answer fetched after the write is stored as usual. A route's purge is one
// tombstone on the route's name, above every key of the route, applied by
// freeing the route's answers (Tombstones.Purge).
//
// The package knows neither memberlist nor Raft nor the node: it reads the
// ring through Ring, addresses through Members, and is told of a member
// coming (back) up with MemberUp by whoever watches membership.
package replica
