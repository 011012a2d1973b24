package noredirect_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/noredirect"
)

func TestClientDoesNotFollow(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	for _, status := range []int{301, 302, 303, 307, 308} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/steal?secret=x", status)
		}))
		resp, err := noredirect.Client(nil).Post(srv.URL, "text/plain", strings.NewReader("client_secret=s3cret"))
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != status || !noredirect.IsRedirect(resp.StatusCode) {
			t.Errorf("%d: got %d", status, resp.StatusCode)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("%d requests reached the Location", n)
	}
	if http.DefaultClient.CheckRedirect != nil {
		t.Fatal("the default client was modified")
	}
}

// TestErrorHidesCredentials: whatever form a Location takes, the error
// names at most its scheme, host and path, never the user information,
// query, fragment or opaque part that may carry a credential. Each
// Location is answered by a server and read from the response, as the
// clients do.
func TestErrorHidesCredentials(t *testing.T) {
	const user, pw, tok = "canary-user", "canary-pw", "canary-token"
	long := "https://evil.example/" + strings.Repeat("a", 500)
	for _, c := range []struct {
		name, loc, want string
	}{
		{"absolute", "https://" + user + ":" + pw + "@evil.example/p?token=" + tok + "#" + tok, "Location https://evil.example/p)"},
		{"opaque", "https:" + user + ":" + pw + "@evil.example", "Location (opaque, not shown))"},
		{"opaque without scheme", user + ":" + pw + "@evil.example/x", "Location (opaque, not shown))"},
		{"scheme-relative", "//" + user + ":" + pw + "@evil.example/p", "Location //evil.example/p)"},
		{"userinfo in path", "https:/" + user + ":" + pw + "@evil.example/p", "Location https:/(path not shown))"},
		{"escaped at in path", "/" + user + "%3A" + pw + "%40evil.example", "Location /(path not shown))"},
		{"other scheme", "ftp://" + user + ":" + pw + "@evil.example/x?" + tok, "Location (other scheme)://evil.example/x)"},
		{"unparsable", "https://evil.example/" + pw + "%zz?" + tok, "Location (unparsable, not shown))"},
		{"query only", "?token=" + tok, "Location (empty))"},
		{"http", "http://evil.example/token?password=" + pw, "Location http://evil.example/token)"},
		{"long", long, "Location https://evil.example/" + strings.Repeat("a", 200-len("https://evil.example/")) + "…)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header()["Location"] = []string{c.loc}
				w.WriteHeader(http.StatusTemporaryRedirect)
			}))
			defer srv.Close()
			resp, err := noredirect.Client(srv.Client()).Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			msg := noredirect.Error(resp.StatusCode, resp.Header.Get("Location")).Error()
			for _, secret := range []string{user, pw, tok} {
				if strings.Contains(msg, secret) {
					t.Errorf("%s shows %q", msg, secret)
				}
			}
			if !strings.Contains(msg, "redirect 307 not followed ("+c.want) {
				t.Errorf("got %s\nwant it to name %s", msg, c.want)
			}
		})
	}
}

func TestErrorWithoutLocation(t *testing.T) {
	if got := noredirect.Error(307, "").Error(); !strings.HasPrefix(got, "redirect 307 not followed (no Location)") {
		t.Errorf("got %s", got)
	}
}

type idleCloser struct {
	http.RoundTripper
	closed atomic.Int32
}

func (c *idleCloser) CloseIdleConnections() { c.closed.Add(1) }

// The copy's CloseIdleConnections still reaches the caller's transport
// (loyalty.Client.Close relies on it).
func TestClientClosesIdleConnections(t *testing.T) {
	tr := &idleCloser{RoundTripper: http.DefaultTransport}
	noredirect.Client(&http.Client{Transport: tr}).CloseIdleConnections()
	if tr.closed.Load() != 1 {
		t.Fatal("CloseIdleConnections did not reach the transport")
	}
}
