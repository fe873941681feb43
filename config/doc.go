// Package config owns the YAML configuration file of a Levee node.
//
// Data flow: Load reads a file and hands its bytes to Parse. Parse reads the
// YAML into a node tree, then walks that tree onto Default() (each route onto
// DefaultRoute()), so a key that is absent keeps its default and a key that
// is present is taken as written, even when the written value is invalid.
// The walk is driven by the Go struct's yaml tags and reports unknown keys,
// duplicate keys and undecodable values with their exact key path
// ("routes[0].cache.fresh"). hosts:, keyed by origin, is walked the same
// way, each entry onto DefaultHostLimits, its paths quoting the key
// (hosts["https://api.example.com"].rate). Parse then fills the derived fields
// (Node.DataDir when absent, Route.UpstreamURL) and runs Validate, which
// checks every rule and joins every problem into one error.
//
// cmd/node overrides single node, cluster and cache scalars from flags and
// environment variables through Set (one per SettableKeys entry) and calls
// Validate again afterwards.
//
// A bound that a runtime part enforces is that part's: Validate checks
// routes[].breaker.failures with breaker.MaxFailures, cluster.partitions
// with ring.MaxPartitions, queue.max_jobs with queue.MaxJobs, and so on,
// so a file Validate accepts is one every part takes and a bound cannot
// drift between the two (a breaker.failures of 2000 once passed Validate
// and every request on the route answered 500). Bounds no part checks
// (node.read_timeout's floor, node.max_header_bytes' ceiling) are this
// package's, exported for the parts that trust them.
// node/bounds_test.go walks every numeric key at its bounds through a
// started node.
//
// Every error this package returns for bad input wraps ErrInvalid; the ones
// tied to a key are *FieldError values carrying the key path.
package config
