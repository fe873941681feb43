package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/jepsen-lite/history"
)

// page is what one session read sent and got.
type page struct {
	p    int
	user string   // the sid cookie sent; "" for a first visit
	set  []string // Set-Cookie sids received
	body string   // the session the body names
	mint string
	new  bool
}

// sessionRead appends an invoke and an ok completion of the session page.
func sessionRead(h *History, at float64, pg page) {
	inv := history.Op{Type: history.Invoke, Process: pg.p, Node: "n1", F: history.FSession, Tenant: "acme", Key: "session",
		Session: pg.user, Time: sec(at)}
	done := inv
	done.Type, done.Time, done.Latency, done.Status = history.OK, sec(at)+sec(0.05), sec(0.05), 200
	done.BodyTenant, done.BodyKey, done.Version, done.FetchedAt = "acme", "/api/session", 1, t0.Add(time.Duration(sec(at)))
	done.SetCookies, done.BodySession, done.Mint, done.NewSession = pg.set, pg.body, pg.mint, pg.new
	h.Ops = append(h.Ops, inv, done)
}

// signedIn is user's own page, as the upstream answers it.
func signedIn(p int, user, mint string) page { return page{p: p, user: user, body: user, mint: mint} }

// firstVisit is a new session sid, as the upstream mints it.
func firstVisit(p int, sid, mint string) page {
	return page{p: p, set: []string{sid}, body: sid, mint: mint, new: true}
}

func TestCookieIsolation(t *testing.T) {
	build := func(pages ...page) func() *History {
		return func() *History {
			h := base()
			for i, pg := range pages {
				sessionRead(h, 1+0.001*float64(i), pg)
			}
			return h
		}
	}
	stripped := firstVisit(4, "s3", "m3")
	stripped.set = nil
	ownCookieOtherBody := firstVisit(4, "s4", "m3")
	ownCookieOtherBody.body = "s3"
	twoSIDs := firstVisit(3, "s3", "m3")
	twoSIDs.set = []string{"s3", "s4"}
	twice := firstVisit(3, "s3", "m3")
	twice.set = []string{"s3", "s3"}
	userGotMinted := page{p: 1, user: "u1", set: []string{"s5"}, body: "s5", mint: "m5", new: true}
	visitorGotUser := signedIn(3, "u1", "m7")
	visitorGotUser.user = ""

	runCases(t, CookieIsolation, []checkCase{
		{name: "no session reads", pass: true, build: base},
		{name: "every user gets their own page, every first visit its own session", pass: true,
			build: build(signedIn(1, "u1", "m1"), signedIn(2, "u2", "m2"), firstVisit(3, "s3", "m3"), firstVisit(4, "s4", "m4"))},
		{name: "a page served again to its own user is counted, not judged", pass: true,
			build: build(signedIn(1, "u1", "m1"), signedIn(1, "u1", "m1"))},
		{name: "one Set-Cookie header repeated in one answer", pass: true, build: build(twice)},
		{name: "an ok session body without session tags is counted, not judged", pass: true,
			build: build(page{p: 1, user: "u1"})},
		{name: "a first visit's whole answer replayed to another", pass: false, violations: 1,
			build: build(firstVisit(3, "s3", "m3"), firstVisit(4, "s3", "m3"))},
		{name: "a first visit's answer replayed to the same process", pass: false, violations: 1,
			build: build(firstVisit(3, "s3", "m3"), firstVisit(3, "s3", "m3"))},
		{name: "a minted page without its Set-Cookie to another first visit", pass: false, violations: 1,
			build: build(firstVisit(3, "s3", "m3"), stripped)},
		{name: "a first visit gets its own Set-Cookie with another's page", pass: false, violations: 1,
			build: build(firstVisit(3, "s3", "m3"), ownCookieOtherBody)},
		{name: "a second sid in one answer", pass: false, violations: 1, build: build(twoSIDs)},
		{name: "a signed-in user gets another user's page", pass: false, violations: 1,
			build: build(signedIn(1, "u1", "m1"), page{p: 2, user: "u2", body: "u1", mint: "m1"})},
		{name: "a signed-in user gets a page naming another user", pass: false, violations: 1,
			build: build(page{p: 2, user: "u2", body: "u1", mint: "m9"})},
		{name: "a signed-in user gets a freshly minted session", pass: false, violations: 1, build: build(userGotMinted)},
		{name: "a first visit gets a signed-in user's page", pass: false, violations: 1, build: build(visitorGotUser)},
		{name: "a Set-Cookie on a comments read", pass: false, violations: 1, build: func() *History {
			h := base()
			okRead(h, 1, "n1", "acme", "stories/1/comments", 1, 1, 1)
			h.Ops[1].SetCookies = []string{"s9"}
			return h
		}},
		{name: "a first visit's Set-Cookie on a comments read", pass: false, violations: 1, build: func() *History {
			h := build(firstVisit(3, "s3", "m3"))()
			okRead(h, 1, "n1", "acme", "stories/1/comments", 2, 1, 1)
			h.Ops[3].SetCookies = []string{"s3"}
			return h
		}},
		{name: "a Set-Cookie on an error answer", pass: false, violations: 1, build: func() *History {
			h := base()
			failRead(h, 3, "n1", "acme", "session", 1, history.Fail, 502)
			h.Ops[1].F, h.Ops[1].SetCookies = history.FSession, []string{"s3"}
			return h
		}},
		{name: "a first visit cut short keeps its Set-Cookie", pass: true, build: func() *History {
			h := base()
			failRead(h, 3, "n1", "acme", "session", 1, history.Info, 200)
			h.Ops[1].F, h.Ops[1].SetCookies = history.FSession, []string{"s3"}
			return h
		}},
		{name: "a first visit with an undecodable body keeps its Set-Cookie", pass: true, build: func() *History {
			h := build(page{p: 3, set: []string{"s3"}})()
			h.Ops[1].Error = "workload: body is not a tagged envelope"
			return h
		}},
		{name: "a signed-in read cut short with a Set-Cookie", pass: false, violations: 1, build: func() *History {
			h := base()
			failRead(h, 1, "n1", "acme", "session", 1, history.Info, 200)
			h.Ops[1].F, h.Ops[1].Session, h.Ops[1].SetCookies = history.FSession, "u1", []string{"s3"}
			return h
		}},
		{name: "a cut-short first visit's sid given again", pass: false, violations: 1, build: func() *History {
			h := base()
			failRead(h, 3, "n1", "acme", "session", 1, history.Info, 200)
			h.Ops[1].F, h.Ops[1].SetCookies = history.FSession, []string{"s3"}
			sessionRead(h, 2, firstVisit(4, "s3", "m3"))
			return h
		}},
		{name: "reads without an answer are not judged", pass: true, build: func() *History {
			h := build(firstVisit(3, "s3", "m3"))()
			failRead(h, 4, "n1", "acme", "session", 2, history.Info, 0)
			h.Ops[3].F, h.Ops[3].SetCookies = history.FSession, []string{"s3"}
			return h
		}},
	})
}

func TestCookieIsolationBlamesTheClientWithTheWrongPage(t *testing.T) {
	cases := []struct {
		name          string
		leakFirst     bool
		want, notWant string
	}{
		{name: "owner completes first", want: "process 2 (user u2)", notWant: "process 1"},
		{name: "leaked copy completes first", leakFirst: true, want: "process 2 (user u2)", notWant: "process 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			own, leak := 1.0, 1.001
			if tc.leakFirst {
				own, leak = leak, own
			}
			sessionRead(h, own, signedIn(1, "u1", "m1"))
			sessionRead(h, leak, page{p: 2, user: "u2", body: "u1", mint: "m1"})
			r := CookieIsolation(h, DefaultConfig())
			if r.Total != 1 {
				t.Fatalf("violations = %v", r.Violations)
			}
			what := r.Violations[0].What
			if !strings.Contains(what, tc.want) || strings.Contains(what, tc.notWant) || !strings.Contains(what, "session u1 (mint m1") {
				t.Errorf("violation %q, want it to blame %q only", what, tc.want)
			}
		})
	}
}

func TestCacheCheckersLeaveSessionsOut(t *testing.T) {
	h := base()
	// An upstream outage: the per-user page is never cached, so failing it
	// is no stale-if-error violation; its many answers in one fresh window
	// are no coalescing violation.
	h.Faults = []history.Fault{fault("upstream-down", 10, 30)}
	sessionRead(h, 1, signedIn(1, "u1", "m1"))
	failRead(h, 1, "n1", "acme", "session", 12, history.Fail, 503)
	h.Ops[3].F, h.Ops[3].Session = history.FSession, "u1"
	for i, at := range []float64{1, 1.5, 2} {
		c := call("acme", "/api/session", at, 200, "n1")
		c.Session, c.Mint = "u1", "m"+string(rune('1'+i))
		h.Upstream = append(h.Upstream, c)
	}
	for _, f := range []Func{StaleIfError, Coalescing} {
		if r := f(h, DefaultConfig()); !r.Pass {
			t.Errorf("%s: %v", r.Name, r.Violations)
		}
	}
}
