package ui

import (
	"bytes"
	"embed"
	"encoding/json"
	"html/template"
	"net/http"
	"time"
)

//go:embed assets
var assets embed.FS

// page is parsed once: the template is part of the binary, so a parse
// error is a build mistake that the package's tests catch.
var page = template.Must(template.New("page.html").Funcs(funcs).ParseFS(assets, "assets/page.html"))

// contentSecurityPolicy allows nothing but this node: the script and the
// stylesheet are files served next to the page (no inline script, style
// or event handler), the script fetches only this node, and no page may
// frame this one.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the operator page under /-/ui/:
//
//	GET /-/ui/            the page, rendered with the current state
//	GET /-/ui/state.json  the same state as JSON
//	GET /-/ui/app.js      the script that keeps the page live
//	GET /-/ui/style.css   the stylesheet
//
// Any other path under /-/ui/ is a 404. src.Status is required.
func Handler(src Source) http.Handler {
	if src.Now == nil {
		src.Now = time.Now
	}
	h := &handler{src: src}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /-/ui/{$}", h.page)
	mux.HandleFunc("GET /-/ui/state.json", h.state)
	mux.HandleFunc("GET /-/ui/app.js", asset("assets/app.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /-/ui/style.css", asset("assets/style.css", "text/css; charset=utf-8"))
	return secure(mux)
}

type handler struct{ src Source }

// view is what the template renders: the state, and what the page needs to
// print the curl commands that stand in for the script.
type view struct {
	State
	// Base is this node's address as the browser reached it
	// ("http://host:port"), for the curl commands.
	Base string
}

func (h *handler) page(w http.ResponseWriter, r *http.Request) {
	v := view{State: h.src.snapshot(), Base: baseURL(r)}
	var buf bytes.Buffer
	// Rendered whole before a byte is sent, so a failure is a clean 500
	// rather than half a page.
	if err := page.Execute(&buf, v); err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

func (h *handler) state(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(h.src.snapshot())
}

func asset(name, contentType string) http.HandlerFunc {
	body, err := assets.ReadFile(name)
	if err != nil {
		panic("ui: missing embedded asset " + name) // a build mistake, caught by the tests
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}
}

// secure sets the headers every answer carries. no-store: the page is a
// live view, and a cached copy would show a state that no longer holds.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
