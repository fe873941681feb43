package demoupstream

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// noSessionDelay keeps session answers instant in tests that do not time
// them.
func noSessionDelay(c *Config) { c.SessionDelay = 0 }

// sessionOf decodes a session answer's envelope and data.
func sessionOf(t *testing.T, r response) (Envelope, Session) {
	t.Helper()
	env := decodeEnvelope(t, r.body)
	var s Session
	mustUnmarshal(t, env.Data, &s)
	return env, s
}

// setCookieSID returns the sid a response set, "" when none.
func setCookieSID(r response) string {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == SessionCookie {
			return c.Value
		}
	}
	return ""
}

func TestSessionAnswersForTheCookieOrMintsOne(t *testing.T) {
	cases := []struct {
		name    string
		cookie  string // Cookie header, "" for none
		wantSID string // "" means a newly minted one
	}{
		{name: "first visit", cookie: ""},
		{name: "signed in", cookie: "sid=alice-7", wantSID: "alice-7"},
		{name: "signed in among other cookies", cookie: "theme=dark; sid=bob_2", wantSID: "bob_2"},
		{name: "malformed sid is a first visit", cookie: "sid=../etc"},
		{name: "empty sid is a first visit", cookie: "sid="},
		{name: "other cookies only", cookie: "theme=dark"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// MaxAge must not apply: it would tell a cache the page is public.
			h := newHarness(t, func(c *Config) { noSessionDelay(c); c.MaxAge = time.Minute })
			r := h.get(t, "/api/session", map[string]string{HeaderTenant: "acme", HeaderNodeHint: "n2", "Cookie": tc.cookie})
			if r.status != http.StatusOK {
				t.Fatalf("status = %d: %s", r.status, r.body)
			}
			env, s := sessionOf(t, r)
			minted := tc.wantSID == ""
			if s.New != minted || s.Mint == "" || (!minted && s.SID != tc.wantSID) || (minted && !strings.HasPrefix(s.SID, "s")) {
				t.Errorf("session = %+v, want sid %q (new %v)", s, tc.wantSID, minted)
			}
			if got, want := setCookieSID(r), map[bool]string{true: s.SID}[minted]; got != want {
				t.Errorf("Set-Cookie sid = %q, want %q (header %q)", got, want, r.header.Values("Set-Cookie"))
			}
			if minted && !strings.Contains(r.header.Get("Set-Cookie"), "HttpOnly") {
				t.Errorf("Set-Cookie = %q, want HttpOnly", r.header.Get("Set-Cookie"))
			}
			if env.Tenant != "acme" || env.Key != "/api/session" || env.Version < 1 {
				t.Errorf("envelope = %+v", env)
			}
			for _, hd := range []string{"Cache-Control", "ETag", "Last-Modified"} {
				if v := r.header.Get(hd); v != "" {
					t.Errorf("%s = %q, want none", hd, v)
				}
			}
			if r.header.Get("Vary") != HeaderTenant {
				t.Errorf("Vary = %q, want only %s", r.header.Get("Vary"), HeaderTenant)
			}
			c := h.s.Log()[0]
			if c.Session != s.SID || c.Mint != s.Mint || c.NewSession != minted || c.Status != 200 || c.Node != "n2" {
				t.Errorf("call log = %+v, want the answer's session %+v", c, s)
			}
		})
	}
}

func TestSessionIDsNeverRepeat(t *testing.T) {
	h := newHarness(t, noSessionDelay)
	const n = 20
	bodies := make(chan []byte, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/api/session", nil)
			if i%2 == 0 {
				req.Header.Set("Cookie", "sid=same-user")
			}
			resp, err := h.client.Do(req)
			if err != nil {
				bodies <- nil
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			bodies <- b
		})
	}
	wg.Wait()
	close(bodies)
	var answers []Session
	for b := range bodies {
		_, s := sessionOf(t, response{body: b})
		answers = append(answers, s)
	}
	mints, sids := map[string]bool{}, map[string]bool{}
	for _, s := range answers {
		if mints[s.Mint] {
			t.Errorf("mint %s handed out twice", s.Mint)
		}
		mints[s.Mint] = true
		if s.New {
			if sids[s.SID] {
				t.Errorf("sid %s minted twice", s.SID)
			}
			sids[s.SID] = true
		}
	}
	if len(sids) != n {
		t.Errorf("%d sessions minted, want %d", len(sids), n)
	}
	logged := 0
	for _, c := range h.s.Log() {
		if mints[c.Mint] {
			logged++
		}
	}
	if logged != 2*n {
		t.Errorf("%d answers in the call log, want %d", logged, 2*n)
	}
	// Another Server (a restarted demo upstream) never repeats an id.
	other := newHarness(t, noSessionDelay)
	if _, s := sessionOf(t, other.get(t, "/api/session", nil)); mints[s.Mint] || sids[s.SID] {
		t.Errorf("a second Server repeated %+v", s)
	}
}

func TestSessionIsFaultedLikeEveryEndpoint(t *testing.T) {
	cases := []struct {
		name   string
		fault  Fault
		status int
	}{
		{"down everywhere", Fault{Mode: ModeDown}, 503},
		{"down on the session path", Fault{Mode: ModeDown, Paths: []string{"/api/session"}}, 503},
		{"rate limited", Fault{Mode: ModeRateLimit, RetryAfter: 2}, 429},
		{"fault elsewhere", Fault{Mode: ModeDown, Paths: []string{"/api/stories"}}, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, noSessionDelay)
			mustSetFault(t, h.s, tc.fault)
			r := h.get(t, "/api/session", nil)
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d", r.status, tc.status)
			}
			c := h.s.Log()[0]
			if tc.status == 200 {
				if c.Session == "" || setCookieSID(r) != c.Session {
					t.Errorf("call %+v, Set-Cookie %q", c, setCookieSID(r))
				}
				return
			}
			if setCookieSID(r) != "" || c.Session != "" || c.Mint != "" || c.Fault != tc.fault.Mode {
				t.Errorf("faulted answer set a session: call %+v, Set-Cookie %q", c, setCookieSID(r))
			}
		})
	}
}

func TestSessionIgnoresValidators(t *testing.T) {
	h := newHarness(t, noSessionDelay)
	for _, hdr := range []map[string]string{{"If-None-Match": "*"}, {"If-Modified-Since": time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}} {
		if r := h.get(t, "/api/session", hdr); r.status != 200 {
			t.Errorf("%v: status %d, want 200 (every answer is new)", hdr, r.status)
		}
	}
}

func TestSessionDelayIsAbortedByClose(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.SessionDelay = time.Hour })
	done := make(chan int, 1)
	go func() {
		resp, err := h.client.Get(h.srv.URL + "/api/session")
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	waitFor(t, "the session request to be in flight", func() bool { return h.s.InFlight() == 1 })
	_ = h.s.Close()
	if got := <-done; got != http.StatusServiceUnavailable {
		t.Fatalf("status = %d, want 503", got)
	}
	if c := h.s.Log()[0]; c.Session != "" || c.Mint != "" {
		t.Errorf("aborted answer logged a session: %+v", c)
	}
}
