package tokensource_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// TestGrantAnswersAreBounded: an identity provider answering a megabyte is
// a malformed answer that names the limit, and no more of it is read than
// the limit and a byte (nothing when Content-Length says it is over); an
// error code that is not one (too long, free text) is not kept.
func TestGrantAnswersAreBounded(t *testing.T) {
	const canary = "canary-idp-text"
	valid := `{"access_token":"eyJaccess.1.sig","expires_in":60,"token_type":"Bearer"}`
	for _, c := range []struct {
		name          string
		status        int
		body          string
		contentLength bool
		tooLarge      bool
		transient     bool
	}{
		{"200 of 1 MiB", 200, valid + strings.Repeat(" ", 1<<20), false, true, false},
		{"200 of 1 MiB, Content-Length", 200, valid + strings.Repeat(" ", 1<<20), true, true, false},
		{"503 of 1 MiB", 503, "<html>" + strings.Repeat("x", 1<<20) + "</html>", false, true, true},
		{"400 with a long error", 400, `{"error":"` + strings.Repeat(canary, 1000) + `"}`, false, false, false},
		{"400 with free text", 400, `{"error":"` + canary + ` <script>"}`, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if c.contentLength {
					w.Header().Set("Content-Length", strconv.Itoa(len(c.body)))
				}
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			}))
			defer ts.Close()
			ct := &testkit.CountingTransport{RT: &http.Transport{}}
			defer ct.RT.(*http.Transport).CloseIdleConnections()
			p, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: ts.URL, ClientID: "cid", ClientSecret: secret,
				Username: "user", Password: password, HTTPClient: &http.Client{Transport: ct}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Login(context.Background())
			var te *tokensource.Error
			if !errors.As(err, &te) || te.Status != c.status || te.Transient() != c.transient {
				t.Fatalf("got %v, want HTTP %d, transient %v", err, c.status, c.transient)
			}
			if strings.Contains(err.Error(), canary) || strings.Contains(te.Code, canary) {
				t.Errorf("the server's text is kept: %v", err)
			}
			if named := strings.Contains(err.Error(), fmt.Sprint(tokensource.MaxResponseBytes)); named != c.tooLarge {
				t.Errorf("%v: names the limit %v, want %v", err, named, c.tooLarge)
			}
			most := int64(tokensource.MaxResponseBytes + 1)
			if c.contentLength {
				most = 0
			}
			if n := ct.Read(); n > most {
				t.Errorf("read %d bytes of the answer, want at most %d", n, most)
			}
		})
	}
}
