package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/demoupstream"
	"github.com/levee/levee/queue"
	"github.com/levee/levee/upstream/hostkey"
)

// TestOperatorPageInChromium drives the operator page of an in-process
// three-node cluster in a real headless Chromium: it shows the three
// members, a dead job replayed from its button (with the admin token typed
// into the page), a host's Retry-After pause, and the comments breaker
// open after the upstream goes down, live, without a reload; with
// JavaScript off the same page shows the state and the curl commands; and
// at a phone's width nothing overflows.
//
// LEVEE_UI_SCREENSHOT=docs/operator-page.png (a path from the repository
// root) saves a screenshot of the page at the end.
func TestOperatorPageInChromium(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	orders, ordersURL := newOrdersUpstream(t)
	c := newTestCluster(t, 3, breakerEdit(time.Minute, 1), ordersRoute(ordersURL))

	// Two jobs the orders upstream refuses: one for good, one only the
	// first time (it was fixed meanwhile), which the page replays.
	stuck := c.enqueue(0, "/orders/poison/1")
	fixed := c.enqueue(1, "/orders/fixed/1")
	c.waitJob(0, stuck, queue.Dead, 10*time.Second)
	c.waitJob(0, fixed, queue.Dead, 10*time.Second)

	ctx := newBrowser(t, chromium)
	browse(t, ctx, "open the page and start polling", chromedp.Navigate(c.url(0, "/-/ui/")), chromedp.WaitVisible(chromedp.ID("poll")))
	members := evaluate[[]string](t, ctx, `Array.from(document.querySelectorAll('#members tr[data-member]'), r => r.dataset.member + ' ' + r.dataset.state)`)
	if want := []string{"n1 alive", "n2 alive", "n3 alive"}; !slices.Equal(members, want) {
		t.Fatalf("members on the page: %q, want %q", members, want)
	}

	replayFromThePage(t, ctx, fixed)
	if v := c.waitJob(2, fixed, queue.Done, 10*time.Second); v.Attempts != 1 || orders.calls("/api/fixed/1") != 2 {
		t.Fatalf("replayed job %+v after %d calls, want it delivered once more (attempts reset)", v, orders.calls("/api/fixed/1"))
	}
	if v, _ := c.job(0, stuck); v.State != queue.Dead {
		t.Fatalf("the job not replayed is %s, want dead", v.State)
	}

	// A 429 with Retry-After pauses the orders host cluster-wide.
	c.enqueue(2, "/orders/throttle/1")
	u, _ := url.Parse(ordersURL)
	waitOnPage(t, ctx, "the orders host paused", fmt.Sprintf(`document.querySelector('tr[data-host=%q]')?.hasAttribute('data-paused')`, hostkey.Of(u)))

	// Two keys n1 owns, each a miss then a hit: n1's cache serves half.
	for _, p := range keysOwnedBy(c, 0, 1, 2) {
		c.get(0, p, "X-Tenant", "acme").expect(t, http.StatusOK, "MISS")
		c.get(0, p, "X-Tenant", "acme").expect(t, http.StatusOK, "HIT")
	}
	tripComments(t, c)
	waitOnPage(t, ctx, "the comments breaker open", `document.querySelector('tr[data-breaker="comments"]')?.dataset.state === 'open'`)
	// Open the breaker's history (the page keeps it open across updates).
	history := evaluate[string](t, ctx, `(() => {
		const d = document.querySelector('tr[data-breaker="comments"] details');
		d.open = true;
		return d.querySelector('li').textContent;
	})()`)
	if !regexp.MustCompile(`closed → open by n[123] \(failures\)`).MatchString(history) {
		t.Fatalf("the breaker's history %q does not show the trip and the node that committed it", history)
	}
	waitOnPage(t, ctx, "the cache's hit ratio", `document.querySelector('#cache strong').textContent === '50.0%'`)
	saveScreenshot(t, ctx)

	browse(t, ctx, "a phone's width", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	if w := evaluate[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
		t.Errorf("at 375 px the page is %d px wide: it overflows", w)
	}
	withoutScript(t, ctx, c.url(0, "/-/ui/"))
	checkHeaders(t, c, c.url(0, "/-/ui/"))
}

// replayFromThePage types the admin token into the page and clicks the
// replay button of job id.
func replayFromThePage(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	button := chromedp.CSS(fmt.Sprintf(`tr[data-job=%q] button[data-replay]`, id))
	browse(t, ctx, "enter the admin token", chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Click(chromedp.CSS(`#token-form button[type=submit]`)), chromedp.WaitVisible(button))
	if n := evaluate[int](t, ctx, `document.querySelectorAll('#dead-rows tr').length`); n != 2 {
		t.Fatalf("%d dead jobs listed, want 2", n)
	}
	browse(t, ctx, "click replay", chromedp.Click(button))
	waitOnPage(t, ctx, "the replay confirmed", `document.getElementById('dead-msg').textContent.includes('queued again')`)
	if v := evaluate[string](t, ctx, `document.getElementById('token').value + document.documentElement.outerHTML`); strings.Contains(v, adminToken) {
		t.Fatal("the admin token is in the page")
	}
}

// tripComments takes the demo upstream down and sends cold keys through
// every node until every node's committed breaker is open.
func tripComments(t *testing.T, c *testCluster) {
	t.Helper()
	if err := c.up.SetFault(demoupstream.Fault{Mode: demoupstream.ModeDown}); err != nil {
		t.Fatal(err)
	}
	for i := 0; c.view(0).State != breaker.Open && i < 50; i++ {
		c.get(i%3, routePath(1000+i), "X-Tenant", "acme")
	}
	waitAllState(c, breaker.Open)
}

// withoutScript loads page in a tab with JavaScript off: the server's
// rendering is the whole page, and the curl commands stand in for the
// replay button.
func withoutScript(t *testing.T, parent context.Context, page string) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(parent)
	defer cancel()
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatalf("disabling JavaScript: %v", err)
	}
	browse(t, ctx, "open the page without JavaScript", chromedp.Navigate(page), chromedp.WaitReady(chromedp.ID("dead")))
	got := evaluate[[]string](t, ctx, `[
		String(document.querySelectorAll('#members tr[data-member]').length),
		document.querySelector('tr[data-breaker="comments"]').dataset.state,
		String(document.getElementById('token-form').hidden),
		String(document.getElementById('poll').hidden),
		document.querySelector('#dead pre')?.textContent ?? 'no curl commands']`)
	if len(got) != 5 || got[0] != "3" || got[1] != "open" || got[2] != "true" || got[3] != "true" ||
		!strings.Contains(got[4], "/-/jobs/JOB_ID/replay") {
		t.Fatalf("without JavaScript: members, breaker, token form hidden, poll hidden, curl = %q", got)
	}
}

// checkHeaders: the page is served with its security headers on the
// node's admin mux.
func checkHeaders(t *testing.T, c *testCluster, page string) {
	t.Helper()
	resp, err := c.client.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != http.StatusOK || !strings.Contains(csp, "script-src 'self'") || resp.Header.Get("Cache-Control") != "no-store" ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(string(body), `data-member="n3"`) {
		t.Fatalf("GET %s: %d %v", page, resp.StatusCode, resp.Header)
	}
}

// chromiumPath finds Chromium (Debian's chromium package) or skips the
// test, unless LEVEE_REQUIRE_TOOLS=1 (CI), where a missing browser fails.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "headless-shell", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("LEVEE_REQUIRE_TOOLS") == "1" {
		t.Fatal("chromium not found and LEVEE_REQUIRE_TOOLS=1: apt-get install chromium")
	}
	t.Skip("chromium not found: the operator page's browser test needs it (apt-get install chromium); LEVEE_REQUIRE_TOOLS=1 makes this a failure")
	return ""
}

// newBrowser starts a headless Chromium (no sandbox: CI runs as root) and
// returns a tab's context, bounded so the browser's part of the test ends
// within 45 s; the browser is stopped at cleanup, before the cluster.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(tab, 90*time.Second)
	t.Cleanup(func() {
		cancel()
		cancelTab()
		cancelAlloc() // waits for the browser to exit
	})
	return ctx
}

func browse(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func evaluate[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitOnPage waits until the page's live updates make cond true: up to
// 30 s, since with a browser beside three nodes and a second test run on
// two cores a job's delivery, its commit and the page's next poll can
// each take seconds (the orders host's pause lasts 30 s).
func waitOnPage(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		t.Fatalf("waiting for the page to show %s: %v", what, err)
	}
}

// saveScreenshot writes the page to $LEVEE_UI_SCREENSHOT (a path from the
// repository root), when it is set.
func saveScreenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	path := os.Getenv("LEVEE_UI_SCREENSHOT")
	if path == "" {
		return
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join("..", path)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot saved to %s", path)
}

// ordersRoute adds a second route, orders, in front of upURL (another
// upstream host), with fast queue retries.
func ordersRoute(upURL string) clusterOpt {
	return func(_ int, cfg *config.Config) {
		rt := cfg.Routes[0]
		rt.Name, rt.Prefix, rt.Upstream = "orders", "/orders/", upURL+"/api"
		cfg.Routes = append(cfg.Routes, rt)
		cfg.Queue.Retry.Base, cfg.Queue.Retry.Cap = config.Duration(100*time.Millisecond), config.Duration(200*time.Millisecond)
	}
}

// ordersUpstream answers by path: "poison" 400 always; "fixed" 400 on its
// first call, then 201; "throttle" 429 with Retry-After: 30 on its first
// call, then 201; anything else 201.
type ordersUpstream struct {
	mu   sync.Mutex
	seen map[string]int
}

func newOrdersUpstream(t *testing.T) (*ordersUpstream, string) {
	u := &ordersUpstream{seen: map[string]int{}}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return u, srv.URL
}

func (u *ordersUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.seen[r.URL.Path]++
	n := u.seen[r.URL.Path]
	u.mu.Unlock()
	switch p := r.URL.Path; {
	case strings.Contains(p, "poison"), strings.Contains(p, "fixed") && n == 1:
		http.Error(w, "no such order", http.StatusBadRequest)
	case strings.Contains(p, "throttle") && n == 1:
		w.Header().Set("Retry-After", "30")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	default:
		w.WriteHeader(http.StatusCreated)
	}
}

func (u *ordersUpstream) calls(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[path]
}
