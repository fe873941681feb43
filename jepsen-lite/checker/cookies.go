package checker

import (
	"fmt"
	"slices"

	"github.com/levee/levee/jepsen-lite/history"
)

// CookieIsolation checks that no client ever gets a Set-Cookie or a
// per-user page (the demo upstream's /api/session) minted for another
// client. A page is for the session its body names; a client is entitled
// to it only when that is its own session: the sid cookie it sent, or, on
// a first visit, the sid its own answer set and no one got before it.
// Completions that got an answer are taken in completion order, each
// judged by the first rule it breaks, so one leak is one violation:
//
//  1. a Set-Cookie sid was already received by an earlier completion (a
//     minted session goes to one request only; the later one is blamed);
//  2. a completion with a Set-Cookie sid is not an ok session read whose
//     body is new and names that sid (a Set-Cookie on a comments read,
//     on a signed-in read, on an error, or a second sid in one answer),
//     nor a first visit whose body could not be read or decoded (info
//     with a status, or ok with a body error: the sid may well be its
//     own, and rule 1 still holds it to being the only one);
//  3. a signed-in read's body names another session, or says it minted
//     one;
//  4. a first visit's body is not new, or names a sid its own answer did
//     not set.
//
// Every page served to two clients breaks one of these (a signed-in page
// by rule 3 or 4, a new one by rule 1 or 4), whichever of them completed
// first; a page served again to its own signed-in user (same mint id) is
// counted, not judged. Ok session reads whose body carries no session
// tags are counted (not a session page; tenant-isolation judges the key).
func CookieIsolation(h *History, cfg Config) Result {
	b := newResult("cookie-isolation", cfg)
	j := cookieJudge{sids: map[string]read{}, mints: map[string]bool{}}
	for _, r := range reads(h.Ops) {
		if r.Status == 0 {
			continue // no answer: nothing was handed to this client
		}
		if what := j.judge(r); what != "" {
			b.violate(r.Time, "process %d (%s) GET %s via %s, X-Cache %q: %s",
				r.Process, describeRequester(r), r.Key, r.Node, r.XCache, what)
		}
	}
	b.fig("session reads ok signed-in/first visits", "%d/%d", j.signedIn, j.firstVisits)
	b.fig("Set-Cookie sids received", "%d", len(j.sids))
	b.fig("pages served again to their own user (counted, not judged)", "%d", j.ownReplays)
	b.fig("ok session bodies without session tags", "%d", j.untagged)
	return b.done()
}

// cookieJudge remembers who got each sid first, and the mint ids seen.
type cookieJudge struct {
	sids                                        map[string]read
	mints                                       map[string]bool
	signedIn, firstVisits, ownReplays, untagged int
}

// judge applies the rules to one completion: "" when it keeps them.
func (j *cookieJudge) judge(r read) string {
	if what := j.judgeSetCookies(r); what != "" {
		return what
	}
	if r.Type != history.OK || r.F != history.FSession {
		return ""
	}
	if r.Mint == "" {
		j.untagged++
		return ""
	}
	if what := judgePage(r); what != "" {
		return what
	}
	if r.Session != "" {
		j.signedIn++
	} else {
		j.firstVisits++
	}
	// Past the rules, a mint id seen before can only be the same signed-in
	// user's page again: a new page served twice repeats its Set-Cookie
	// (rule 1) or lacks it (rule 4).
	if j.mints[r.Mint] {
		j.ownReplays++
	}
	j.mints[r.Mint] = true
	return ""
}

// judgeSetCookies applies rules 1 and 2 to every sid r was given.
func (j *cookieJudge) judgeSetCookies(r read) string {
	for i, sid := range r.SetCookies {
		if slices.Contains(r.SetCookies[:i], sid) {
			continue // the same header twice in one answer
		}
		if first, ok := j.sids[sid]; ok {
			return fmt.Sprintf("Set-Cookie sid %s was already given to %s", sid, describeRead(first))
		}
		j.sids[sid] = r
	}
	if unreadFirstVisit(r) {
		return "" // nothing to compare the sid with
	}
	for _, sid := range r.SetCookies {
		if r.Type != history.OK || r.F != history.FSession || !r.NewSession || r.BodySession != sid {
			return fmt.Sprintf("Set-Cookie sid %s on a %s %s answer that did not mint it for this request (body session %q)",
				sid, r.Type, r.F, r.BodySession)
		}
	}
	return ""
}

// unreadFirstVisit reports whether r is a first visit that got an answer
// whose body it could not read (cut short) or decode.
func unreadFirstVisit(r read) bool {
	unread := r.Type == history.Info || (r.Type == history.OK && r.Error != "")
	return unread && r.F == history.FSession && r.Session == ""
}

// judgePage applies rules 3 and 4 to an ok session page.
func judgePage(r read) string {
	switch {
	case r.Session != "" && (r.BodySession != r.Session || r.NewSession):
		return fmt.Sprintf("got the page of session %s (mint %s, new %v)", r.BodySession, r.Mint, r.NewSession)
	case r.Session == "" && !r.NewSession:
		return fmt.Sprintf("got the page of signed-in session %s (mint %s)", r.BodySession, r.Mint)
	case r.Session == "" && !slices.Contains(r.SetCookies, r.BodySession):
		return fmt.Sprintf("got a page minted for session %s (mint %s) that its answer did not set (Set-Cookie %v)",
			r.BodySession, r.Mint, r.SetCookies)
	}
	return ""
}

// describeRequester names who sent r: its user, or a first visit.
func describeRequester(r read) string {
	if r.Session != "" {
		return "user " + r.Session
	}
	return "first visit"
}

// describeRead names a completion in a violation message.
func describeRead(r read) string {
	return fmt.Sprintf("process %d (%s) at %s", r.Process, describeRequester(r), secs(r.Time))
}
