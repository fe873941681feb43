package replica

import (
	"net/http"
	"time"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/store"
)

// ToWire is cache entry e on the wire, under cache key key and routing key
// rkey ("" when the receiver does not need it).
func ToWire(rkey, key string, e *store.Entry) *peer.Entry {
	return &peer.Entry{RoutingKey: rkey, Key: key, Status: e.Status,
		Header: e.Header, Body: e.Body, StoredAt: e.StoredAt.UnixNano(), FreshUntil: e.FreshUntil.UnixNano(),
		StaleUntil: e.StaleUntil.UnixNano(), ErrorUntil: e.ErrorUntil.UnixNano()}
}

// FromWire is a wire entry as the cache holds it.
func FromWire(e *peer.Entry) *store.Entry {
	ent := &store.Entry{Status: e.Status, Header: http.Header(e.Header), Body: e.Body,
		StoredAt: time.Unix(0, e.StoredAt), FreshUntil: time.Unix(0, e.FreshUntil),
		StaleUntil: time.Unix(0, e.StaleUntil), ErrorUntil: time.Unix(0, e.ErrorUntil)}
	if ent.Header == nil {
		ent.Header = http.Header{}
	}
	return ent
}

// forwardRequestOf turns a parsed request into its wire form.
func forwardRequestOf(r *proxy.Request) *peer.ForwardRequest {
	return &peer.ForwardRequest{Route: r.Route, Method: r.Method, Path: r.Path, RawQuery: r.RawQuery,
		Header: r.Header, Body: r.Body, Relayed: r.Relayed}
}

// responseOf turns an owner's wire answer back into a proxy.Response.
func responseOf(fr *peer.ForwardResponse) *proxy.Response {
	resp := &proxy.Response{Status: fr.Status, Header: http.Header(fr.Header), Body: fr.Body,
		Result: proxy.Result(fr.Result), Age: durationNS(fr.Age), FreshFor: durationNS(fr.FreshFor),
		Detail: fr.Detail, Attempts: fr.Attempts}
	if fr.Key != "" && fr.Stored > 0 { // a fresh hit of an owner that names it
		resp.Key, resp.StoredAt = fr.Key, time.Unix(0, fr.Stored)
	}
	return resp
}

// durationNS is a wire duration; a negative one (a peer's bug) is zero.
func durationNS(ns int64) time.Duration { return time.Duration(max(ns, 0)) }
