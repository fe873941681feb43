package proxy

import (
	"math"
	"net/http"
	"strings"

	"github.com/levee/levee/httpfield"
	"github.com/pquerna/cachecontrol/cacheobject"
)

// targetedFields are the targeted cache-control fields (RFC 9213) Levee
// obeys, most specific first: Levee-Cache-Control speaks to Levee alone,
// CDN-Cache-Control to every CDN-class cache (§3), Levee included. The
// first one present and valid is Levee's whole cache policy for the
// answer: Cache-Control and Expires are then ignored (§2.2).
var targetedFields = [...]string{"Levee-Cache-Control", "Cdn-Cache-Control"}

// directives returns the cache directives the answer with header h gives
// Levee: those of its first valid targeted field (targeted true), else
// its Cache-Control. A targeted field that is no Structured Field
// dictionary, or whose known directive has a value of the wrong type
// (max-age="10", max-age=-1), is ignored as if absent (RFC 9213 §2.1); a
// Cache-Control that does not parse is an error (responsePolicy then
// stores nothing).
func directives(h http.Header) (cc *cacheobject.ResponseCacheDirectives, targeted bool, err error) {
	for _, name := range targetedFields {
		if v := h[name]; len(v) > 0 {
			if cc, ok := targetedDirectives(v); ok {
				return cc, true, nil
			}
		}
	}
	cc, err = cacheobject.ParseResponseCacheControl(strings.Join(h.Values("Cache-Control"), ", "))
	return cc, false, err
}

// targetedDirectives reads one targeted field's lines as the directives
// Cache-Control would carry (RFC 9213 §2.1): integers for the delta-seconds
// directives (past 2^31-1 they are 2^31-1, as RFC 9111 §1.2.2 caps
// delta-seconds), Boolean true (or, for no-cache and private, a string of
// field names, taken as the whole answer) for the others. Directives
// Levee does not know are extensions, ignored (RFC 9111 §5.2.3), but
// kept, so must-understand is seen. ok false: the field is to be ignored,
// as an empty one is (§2.1: it "behaves as if the field were not
// present"; taken as a policy of no directives, it voided Cache-Control's
// private or no-store).
func targetedDirectives(lines []string) (cc *cacheobject.ResponseCacheDirectives, ok bool) {
	dict, err := httpfield.ParseDictionary(lines)
	if err != nil || len(dict) == 0 {
		return nil, false
	}
	cc = &cacheobject.ResponseCacheDirectives{MaxAge: -1, SMaxAge: -1, StaleIfError: -1, StaleWhileRevalidate: -1}
	for k, m := range dict {
		switch k {
		case "max-age", "stale-while-revalidate", "stale-if-error":
			if m.Kind != httpfield.Integer || m.Int < 0 {
				return nil, false
			}
			d := cacheobject.DeltaSeconds(min(m.Int, math.MaxInt32))
			switch k {
			case "max-age":
				cc.MaxAge = d
			case "stale-while-revalidate":
				cc.StaleWhileRevalidate = d
			default:
				cc.StaleIfError = d
			}
		case "no-store", "no-cache", "private", "must-revalidate", "proxy-revalidate", "public":
			set, valid := flag(k, m)
			if !valid {
				return nil, false
			}
			if set {
				setFlag(cc, k)
			}
		default:
			cc.Extensions = append(cc.Extensions, k)
		}
	}
	return cc, true
}

// flag reads a Boolean directive: set when true; valid false for a value
// of another type (no-cache and private may also list field names).
func flag(k string, m httpfield.Member) (set, valid bool) {
	switch {
	case m.Kind == httpfield.Boolean:
		return m.Bool, true
	case m.Kind == httpfield.String && (k == "no-cache" || k == "private"):
		return true, true
	}
	return false, false
}

func setFlag(cc *cacheobject.ResponseCacheDirectives, k string) {
	switch k {
	case "no-store":
		cc.NoStore = true
	case "no-cache":
		cc.NoCachePresent = true
	case "private":
		cc.PrivatePresent = true
	case "must-revalidate":
		cc.MustRevalidate = true
	case "proxy-revalidate":
		cc.ProxyRevalidate = true
	case "public":
		cc.Public = true
	}
}
