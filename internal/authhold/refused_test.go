package authhold

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/secretfile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// fileGrant logs in with the password in a file, as the password grant
// with a *_FILE secret does: the identity provider accepts only right.
type fileGrant struct {
	path, right string
	grants      atomic.Int64
}

func (g *fileGrant) Token(context.Context) (tokensource.Token, error) {
	g.grants.Add(1)
	data, err := os.ReadFile(g.path)
	if err != nil || string(data) != g.right {
		return tokensource.Token{}, &tokensource.Error{Grant: "password", Status: http.StatusUnauthorized, Code: "invalid_grant"}
	}
	now := time.Now()
	return tokensource.Token{AccessToken: "t", IssuedAt: now, Expiry: now.Add(time.Hour)}, nil
}

func (g *fileGrant) Invalidate(tokensource.Token) {}

// Records held for an hour behind a refused password, with the hold and
// the token cache at their defaults, cause about twenty logins, not one
// every 4 s (900, enough to lock a partner account). Once the operator
// rewrites the password file, the next probe logs in with it, without
// waiting out the minutes of the refused back-off.
func TestRefusedPasswordHeldForAnHour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &fileGrant{path: filepath.Join(t.TempDir(), "password"), right: "right-password"}
		if err := os.WriteFile(g.path, []byte("wrong"), 0o600); err != nil {
			t.Fatal(err)
		}
		cache := tokensource.NewCache(g, tokensource.CacheOptions{CredentialsChanged: secretfile.NewWatch(g.path).Changed})
		h, err := New(Options{Tokens: cache})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		// An attempt's grant is refused: the hold starts.
		done, err := h.Admit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cache.Token(ctx)
		done(&loyalty.AuthError{Err: err})
		if !h.Held() {
			t.Fatalf("not held after %v", err)
		}

		hour, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		if _, err := h.Admit(hour); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("admitted while the password is refused: %v", err)
		}
		if n := g.grants.Load(); n > 21 {
			t.Fatalf("%d logins in an hour of refusals, want at most 21", n)
		}

		before := g.grants.Load()
		if err := os.WriteFile(g.path, []byte(g.right), 0o600); err != nil {
			t.Fatal(err)
		}
		start := time.Now() // the bubble's clock: exact, not the wall's
		done, err = h.Admit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done(nil)
		if waited := time.Since(start); waited > DefaultMaxBackoff || g.grants.Load() != before+1 || h.Held() {
			t.Fatalf("after the file was fixed: admitted after %s, %d logins, held %v", waited, g.grants.Load()-before, h.Held())
		}
	})
}
