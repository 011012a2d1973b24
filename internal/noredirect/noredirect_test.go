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

func TestError(t *testing.T) {
	for _, c := range []struct {
		loc, want string
	}{
		{"http://user:pw@evil.example/token?password=p#f", "redirect 307 not followed (Location http://evil.example/token)"},
		{"", "redirect 307 not followed (no Location)"},
		{"://bad", "redirect 307 not followed (Location (unparsable))"},
	} {
		if got := noredirect.Error(307, c.loc).Error(); !strings.HasPrefix(got, c.want) {
			t.Errorf("%q: %s", c.loc, got)
		}
	}
}
