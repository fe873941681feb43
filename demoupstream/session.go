package demoupstream

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
)

// SessionCookie is the cookie that carries a session id: sent by the
// client to GET /api/session, set by it on a first visit.
const SessionCookie = "sid"

// Session is the data of GET /api/session: one user's page, the answer a
// shared cache must never hand to anyone else. The demo has no accounts:
// a session id stands for its user.
type Session struct {
	// SID is the session (the user) the answer is for: the sid cookie the
	// request presented, or the one this answer minted.
	SID string `json:"sid"`
	// Mint is unique to this answer, across every answer of every Server:
	// a client that sees a Mint another client saw got a copy of that
	// client's page.
	Mint string `json:"mint"`
	// New is true when this answer minted SID and set it with Set-Cookie
	// (the request presented no valid sid).
	New bool `json:"new"`
}

// sessions mints session ids and mint ids.
type sessions struct {
	// boot makes ids unique across Servers and restarts: a checker
	// counts a sid or mint id seen twice as a leak, so a restarted demo
	// upstream must not hand out "s1" again.
	boot string
	seq  atomic.Uint64
}

func newSessions() *sessions {
	return &sessions{boot: rand.Text()[:8]}
}

// next returns a new sequence number, the mint id of the answer that
// takes it, and the session id that answer mints if it mints one.
func (ss *sessions) next() (seq uint64, mint, sid string) {
	seq = ss.seq.Add(1)
	return seq, fmt.Sprintf("m%d-%s", seq, ss.boot), fmt.Sprintf("s%d-%s", seq, ss.boot)
}

// callKey carries the *Call being logged to a handler that adds to it.
type callKey struct{}

// withCall lets the handlers below r add to the call log entry c.
func withCall(r *http.Request, c *Call) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callKey{}, c))
}

// callOf is the call log entry of r, or a throwaway one when r did not
// come through handleAPI (tests calling a handler directly).
func callOf(r *http.Request) *Call {
	if c, ok := r.Context().Value(callKey{}).(*Call); ok {
		return c
	}
	return &Call{}
}

// handleSession answers for the session the sid cookie names, or mints a
// new one. Unlike the resources it sends no Cache-Control, no validators
// and no Vary: Cookie, as many real per-user pages do: nothing in the
// answer tells a shared cache that it is private, only the request's
// Cookie (or the answer's Set-Cookie) does. Config.MaxAge does not apply.
func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	if err := s.sleep(r.Context(), s.cfg.SessionDelay); err != nil {
		s.abortSleep(w, r, err)
		return
	}
	seq, mint, sid := s.sessions.next()
	sess := Session{SID: sid, Mint: mint, New: true}
	// An absent or malformed sid is a first visit, as a real site treats
	// a cookie it cannot read.
	if c, err := r.Cookie(SessionCookie); err == nil && validID(c.Value) {
		sess = Session{SID: c.Value, Mint: mint}
	}
	data, err := json.Marshal(sess)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if sess.New {
		http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: sess.SID, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	}
	if r.Header.Get(HeaderTenant) != "" {
		w.Header().Set("Vary", HeaderTenant)
	}
	call := callOf(r)
	call.Session, call.Mint, call.NewSession = sess.SID, sess.Mint, sess.New
	env := s.envelope(r, int64(seq))
	env.Data = data
	writeJSON(w, http.StatusOK, env)
}
