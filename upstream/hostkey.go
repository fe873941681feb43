package upstream

import "net/url"

// HostKey names the host u calls, as this package keys its per-host caps
// and pauses: scheme://host:port, lower case, with the default port made
// explicit.
func HostKey(u *url.URL) string { return hostKey(u) }
