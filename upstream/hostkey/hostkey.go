package hostkey

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Of is the key of the host u calls: scheme://host:port, lower case, the
// default port of http (80) or https (443) made explicit.
func Of(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// Parse reads an origin as an operator writes it, "https://api.example.com"
// or "http://10.0.0.7:8080" (a trailing "/" is allowed), and returns its
// key. Anything more than an origin (a path, a query, user info) is an
// error: caps belong to a host, not to a URL on it.
func Parse(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", errors.New("is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New("must start with http:// or https://")
	case u.Opaque != "" || u.Hostname() == "":
		return "", errors.New("must name a host, e.g. https://api.example.com")
	case u.Port() != "" && !validPort(u.Port()):
		return "", errors.New("has an invalid port")
	case u.User != nil, u.Path != "" && u.Path != "/", u.RawQuery != "" || u.ForceQuery, u.Fragment != "" || strings.Contains(s, "#"):
		return "", errors.New("must be an origin only, scheme://host[:port], without user info, path, query or fragment")
	}
	return Of(u), nil
}

func validPort(s string) bool {
	p, err := strconv.ParseUint(s, 10, 16)
	return err == nil && p > 0
}
