package api

import (
	"net/http"

	"github.com/levee/levee/proxy"
)

// InternalPrefix marks node-to-node headers (proxy.InternalPrefix).
const InternalPrefix = proxy.InternalPrefix

// cleanHeader is proxy.CleanHeader, the one owner of the rule.
func cleanHeader(h http.Header, internal bool) http.Header { return proxy.CleanHeader(h, internal) }
