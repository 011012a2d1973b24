package tokensource_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	secret   = "s3cr3t-client"
	password = "pa55-word"
)

// newClock is a settable clock for token lifetimes.
func newClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
}

// idp is a tiny identity provider: counts grants, issues numbered tokens.
type idp struct {
	logins, refreshes atomic.Int64
	rejectRefresh     atomic.Bool
	status            atomic.Int64 // when non-zero, every call answers it
	n                 atomic.Int64
}

func (p *idp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s := p.status.Load(); s != 0 {
		w.WriteHeader(int(s))
		fmt.Fprint(w, `{"error":"temporarily_unavailable"}`)
		return
	}
	if r.URL.Path != "/realms/loyalty-partner/protocol/openid-connect/token" ||
		r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		http.NotFound(w, r)
		return
	}
	_ = r.ParseForm()
	if r.PostForm.Get("client_id") != "cid" || r.PostForm.Get("client_secret") != secret {
		w.WriteHeader(401)
		fmt.Fprint(w, `{"error":"invalid_client","error_description":"Invalid client credentials"}`)
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "password":
		if r.PostForm.Get("username") != "user" || r.PostForm.Get("password") != password {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Invalid user credentials"}`)
			return
		}
		p.logins.Add(1)
	case "refresh_token":
		if p.rejectRefresh.Load() || !strings.HasPrefix(r.PostForm.Get("refresh_token"), "eyJrefresh") {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Token is not active"}`)
			return
		}
		p.refreshes.Add(1)
	default:
		w.WriteHeader(400)
		fmt.Fprint(w, `{"error":"unsupported_grant_type"}`)
		return
	}
	n := p.n.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": fmt.Sprintf("eyJaccess.%d.sig", n), "expires_in": 60, "refresh_expires_in": 600,
		"refresh_token": fmt.Sprintf("eyJrefresh.%d.sig", n), "token_type": "Bearer",
		"session_state": "0b4b3ab4-7f0c-4a38-9d59-1c6b5b1d2f11", "scope": "profile email",
	})
}

func newPassword(t *testing.T, url string, clk *testkit.Clock, log *zap.Logger) *tokensource.Password {
	t.Helper()
	p, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: url, ClientID: "cid", ClientSecret: secret,
		Username: "user", Password: password, Now: clk.Now, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPasswordGrantRefreshesWhileValid(t *testing.T) {
	srv := &idp{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	clk := newClock()
	p := newPassword(t, ts.URL, clk, nil)
	ctx := context.Background()

	t1, err := p.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if t1.TokenType != "Bearer" || !t1.Expiry.Equal(clk.Now().Add(time.Minute)) || !t1.RefreshExpiry.Equal(clk.Now().Add(10*time.Minute)) {
		t.Fatalf("token %+v: expiry %v refresh expiry %v", t1, t1.Expiry, t1.RefreshExpiry)
	}
	if _, err := p.Token(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.logins.Load() != 1 || srv.refreshes.Load() != 1 {
		t.Fatalf("logins %d refreshes %d, want 1 and 1", srv.logins.Load(), srv.refreshes.Load())
	}
	// Refresh token expired → straight to login.
	clk.Advance(11 * time.Minute)
	if _, err := p.Token(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.logins.Load() != 2 || srv.refreshes.Load() != 1 {
		t.Fatalf("logins %d refreshes %d, want 2 and 1", srv.logins.Load(), srv.refreshes.Load())
	}
	// Refresh rejected (revoked session) → login.
	srv.rejectRefresh.Store(true)
	if _, err := p.Token(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.logins.Load() != 3 {
		t.Fatalf("logins %d, want 3", srv.logins.Load())
	}
}

func TestGrantErrorsAreTypedAndClean(t *testing.T) {
	srv := &idp{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	clk := newClock()
	core, logs := observer.New(zap.DebugLevel)

	bad, _ := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: ts.URL, ClientID: "cid", ClientSecret: secret,
		Username: "user", Password: "wrong-" + password, Now: clk.Now, Logger: zap.New(core)})
	_, err := tokensource.NewCache(bad, tokensource.CacheOptions{Now: clk.Now, Logger: zap.New(core)}).Token(context.Background())
	var te *tokensource.Error
	if !errors.As(err, &te) || te.Status != 401 || te.Code != "invalid_grant" || te.Transient() {
		t.Fatalf("err %v (%#v)", err, te)
	}
	srv.status.Store(503)
	_, err = newPassword(t, ts.URL, clk, nil).Token(context.Background())
	if !tokensource.IsTransient(err) {
		t.Fatalf("503 not transient: %v", err)
	}
	srv.status.Store(0)
	ts.Close()
	_, err = newPassword(t, ts.URL, clk, nil).Token(context.Background())
	if !tokensource.IsTransient(err) {
		t.Fatalf("connection refused not transient: %v", err)
	}
	texts := []string{err.Error(), te.Error()}
	for _, e := range logs.All() {
		texts = append(texts, fmt.Sprint(e.Message, e.ContextMap()))
	}
	for _, s := range texts {
		for _, needle := range []string{secret, password, "eyJ"} {
			if strings.Contains(s, needle) {
				t.Errorf("%q leaks %q", s, needle)
			}
		}
	}
}

func TestNewPasswordReportsEveryProblem(t *testing.T) {
	_, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: "not a url"})
	for _, want := range []string{"auth URL", "client id", "client secret", "username", "password"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

func TestTokenNeverFormatsItsValue(t *testing.T) {
	tok := tokensource.Token{AccessToken: "eyJvalue", RefreshToken: "eyJrefresh", TokenType: "Bearer"}
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		if s := fmt.Sprintf(f, tok); strings.Contains(s, "eyJ") {
			t.Errorf("%s prints %s", f, s)
		}
	}
	if s := fmt.Sprintf("%+v", struct{ T tokensource.Token }{tok}); strings.Contains(s, "eyJ") {
		t.Errorf("nested %%+v prints %s", s)
	}
}

// countingSource is a grant whose calls can be held open.
type countingSource struct {
	calls   atomic.Int64
	gate    chan struct{} // when non-nil, each call waits for a receive
	now     func() time.Time
	ttl     time.Duration
	fail    atomic.Bool
	started chan struct{}
}

func (s *countingSource) Token(ctx context.Context) (tokensource.Token, error) {
	n := s.calls.Add(1)
	if s.started != nil {
		s.started <- struct{}{}
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return tokensource.Token{}, ctx.Err()
		}
	}
	if s.fail.Load() {
		return tokensource.Token{}, &tokensource.Error{Grant: "test", Status: 503}
	}
	now := s.now()
	return tokensource.Token{AccessToken: fmt.Sprintf("tok-%d", n), TokenType: "Bearer", IssuedAt: now, Expiry: now.Add(s.ttl)}, nil
}
func (s *countingSource) Invalidate(tokensource.Token) {}

func TestCacheSingleFlight(t *testing.T) {
	clk := newClock()
	src := &countingSource{gate: make(chan struct{}), started: make(chan struct{}, 1), now: clk.Now, ttl: 10 * time.Second}
	c := tokensource.NewCache(src, tokensource.CacheOptions{Now: clk.Now})

	const callers = 200
	var wg sync.WaitGroup
	got := make(chan string, callers)
	for range callers {
		wg.Go(func() {
			tok, err := c.Token(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			got <- tok.AccessToken
		})
	}
	<-src.started
	// A caller that gives up does not cancel the flight for the others.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Token(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v", err)
	}
	close(src.gate)
	wg.Wait()
	close(got)
	for tok := range got {
		if tok != "tok-1" {
			t.Fatalf("caller got %s", tok)
		}
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("%d grant calls for %d callers, want 1", n, callers)
	}
}

func TestCacheProactiveRefreshAndInvalidate(t *testing.T) {
	clk := newClock()
	src := &countingSource{now: clk.Now, ttl: 10 * time.Second}
	c := tokensource.NewCache(src, tokensource.CacheOptions{Now: clk.Now})
	ctx := context.Background()
	get := func() string {
		t.Helper()
		tok, err := c.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tok.AccessToken
	}
	for range 2 {
		if get() != "tok-1" {
			t.Fatal("not cached")
		}
	}
	clk.Advance(7900 * time.Millisecond) // 21% left: fresh
	if get() != "tok-1" {
		t.Fatal("refreshed too early")
	}
	clk.Advance(200 * time.Millisecond) // 19% left: refresh
	if get() != "tok-2" {
		t.Fatal("no proactive refresh")
	}
	// Proactive refresh failing keeps the valid token.
	clk.Advance(8100 * time.Millisecond)
	src.fail.Store(true)
	if get() != "tok-2" {
		t.Fatal("valid token not kept when the refresh failed")
	}
	src.fail.Store(false)
	// Invalidating an older token changes nothing; the current one drops it.
	c.Invalidate(tokensource.Token{AccessToken: "tok-1"})
	if c.Cached().AccessToken != "tok-2" {
		t.Fatal("stale invalidate dropped the current token")
	}
	c.Invalidate(tokensource.Token{AccessToken: "tok-2"})
	if c.Cached().AccessToken != "" {
		t.Fatal("current token not dropped")
	}
	// The failed refresh (call 3) started a back-off: no grant call until
	// it ends, and the caller gets that failure back.
	var be *tokensource.BackoffError
	if _, err := c.Token(ctx); !errors.As(err, &be) || !tokensource.IsTransient(err) || src.calls.Load() != 3 {
		t.Fatalf("during the back-off: %v after %d grant calls", err, src.calls.Load())
	}
	clk.Advance(time.Second)
	if get() != "tok-4" {
		t.Fatalf("after invalidate got %s", c.Cached().AccessToken)
	}
	// Expired and the grant fails: the error surfaces.
	clk.Advance(time.Minute)
	src.fail.Store(true)
	if _, err := c.Token(ctx); !tokensource.IsTransient(err) {
		t.Fatalf("err %v", err)
	}
}

func TestRefreshWindowForShortAndLongTokens(t *testing.T) {
	for _, tc := range []struct {
		ttl, fresh, due time.Duration
	}{
		{2 * time.Second, 1590 * time.Millisecond, 1610 * time.Millisecond},               // 20% of 2 s = 0.4 s
		{5 * time.Minute, 4*time.Minute + 29*time.Second, 4*time.Minute + 31*time.Second}, // capped at 30 s
	} {
		clk := newClock()
		src := &countingSource{now: clk.Now, ttl: tc.ttl}
		c := tokensource.NewCache(src, tokensource.CacheOptions{Now: clk.Now})
		_, _ = c.Token(context.Background())
		clk.Advance(tc.fresh)
		_, _ = c.Token(context.Background())
		if src.calls.Load() != 1 {
			t.Fatalf("ttl %s: refreshed at %s", tc.ttl, tc.fresh)
		}
		clk.Advance(tc.due - tc.fresh)
		_, _ = c.Token(context.Background())
		if src.calls.Load() != 2 {
			t.Fatalf("ttl %s: not refreshed at %s", tc.ttl, tc.due)
		}
	}
}

func TestExchangeGrant(t *testing.T) {
	var body map[string]string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != tokensource.ExchangePath || r.Header.Get("Authorization") != "" {
			w.WriteHeader(404)
			return
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body["token"] == "eyJbad" {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"statusCode":401,"message":"Unauthorized","errors":{"code":"INVALID_TOKEN","message":"bad"}}`)
			return
		}
		fmt.Fprint(w, `{"access_token":"eyJx.y.z","refresh_token":"eyJr.y.z","expires_in":300,"refresh_expires_in":1800,"token_type":"Bearer"}`)
	}))
	defer ts.Close()
	x, err := tokensource.NewExchange(tokensource.ExchangeOptions{BaseURL: ts.URL, Signer: fixedSigner("eyJpartner")})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := x.Token(context.Background())
	if err != nil || tok.AccessToken != "eyJx.y.z" || tok.Lifetime() != 5*time.Minute || body["token"] != "eyJpartner" {
		t.Fatalf("tok %v err %v body %v", tok, err, body)
	}
	_, err = x.Exchange(context.Background(), "eyJbad")
	var te *tokensource.Error
	if !errors.As(err, &te) || te.Status != 401 || te.Code != "INVALID_TOKEN" || strings.Contains(err.Error(), "eyJ") {
		t.Fatalf("err %v", err)
	}
}

type fixedSigner string

func (s fixedSigner) PartnerToken() (string, error) { return string(s), nil }

// A redirect from the token endpoint is never followed, whatever
// http.Client is given: following it re-sent the client secret and the
// password to the host it names, over plain http. It is a non-transient
// failure naming the Location.
func TestGrantRedirectNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/token", http.StatusTemporaryRedirect)
	}))
	defer idp.Close()
	for _, hc := range []*http.Client{nil, {}} { // the default, and one that follows by default
		p, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: idp.URL, ClientID: "cid", ClientSecret: secret,
			Username: "user", Password: password, HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Token(context.Background())
		var te *tokensource.Error
		if !errors.As(err, &te) || te.Status != 307 || te.Transient() || !strings.Contains(err.Error(), "Location "+other.URL+"/token") {
			t.Errorf("client %v: %v", hc, err)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("%d grant requests reached the Location", n)
	}
}

// Failed grants back off exponentially, and Health reports the state
// without a grant call: a refused password retried by every record and
// every /readyz probe could lock the partner account.
func TestCacheBacksOffFailedGrants(t *testing.T) {
	clk := newClock()
	src := &countingSource{now: clk.Now, ttl: time.Minute}
	src.fail.Store(true)
	c := tokensource.NewCache(src, tokensource.CacheOptions{Now: clk.Now, GrantBackoff: time.Second, MaxGrantBackoff: 4 * time.Second})
	ctx := context.Background()
	if err := c.Health(); err == nil || !strings.Contains(err.Error(), "no token obtained yet") {
		t.Fatalf("Health before any grant: %v", err)
	}
	// Grant calls happen at 0, 1, 3, 7, 11 s (back-off 1, 2, 4, 4 s),
	// however often callers ask in between.
	var at []int
	for sec := range 12 {
		for range 5 {
			before := src.calls.Load()
			if _, err := c.Token(ctx); err == nil {
				t.Fatal("a failing grant gave a token")
			}
			if src.calls.Load() > before {
				at = append(at, sec)
			}
			if err := c.Health(); !tokensource.IsTransient(err) {
				t.Fatalf("Health while failing: %v", err)
			}
		}
		clk.Advance(time.Second)
	}
	if fmt.Sprint(at) != "[0 1 3 7 11]" {
		t.Fatalf("grant calls at %v s", at)
	}
	if src.calls.Load() != 5 || c.Health() == nil {
		t.Fatalf("%d grant calls; Health %v", src.calls.Load(), c.Health())
	}
	// A success ends the back-off and clears Health.
	src.fail.Store(false)
	clk.Advance(4 * time.Second)
	if _, err := c.Token(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Health(); err != nil {
		t.Fatalf("Health after a success: %v", err)
	}
}

// Secrets is asked before every grant call: a rotated secret is used at
// the next login, and a failure to read it is a clean, non-transient grant
// error.
func TestPasswordSecretsReadPerGrant(t *testing.T) {
	srv := &idp{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var calls atomic.Int64
	var current atomic.Value
	current.Store(password)
	p, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: ts.URL, ClientID: "cid", Username: "user",
		Secrets: func() (string, string, error) {
			calls.Add(1)
			pw := current.Load().(string)
			if pw == "" {
				return "", "", errors.New("PASSWORD_FILE: no such file")
			}
			return secret, pw, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := p.Login(ctx); err != nil || calls.Load() != 1 {
		t.Fatalf("login: %v after %d reads", err, calls.Load())
	}
	current.Store("wrong")
	var ge *tokensource.Error
	if _, err := p.Login(ctx); !errors.As(err, &ge) || ge.Code != "invalid_grant" || calls.Load() != 2 {
		t.Fatalf("login with a changed password: %v after %d reads", err, calls.Load())
	}
	current.Store("")
	_, err = p.Login(ctx)
	if err == nil || tokensource.IsTransient(err) || strings.Contains(err.Error(), secret) {
		t.Fatalf("unreadable secrets: %v (transient %v)", err, tokensource.IsTransient(err))
	}
	if srv.logins.Load() != 1 {
		t.Fatalf("%d logins", srv.logins.Load())
	}
}

// refusingSource refuses every grant as an identity provider refuses a
// wrong password, until accept is set.
type refusingSource struct {
	calls  atomic.Int64
	accept atomic.Bool
	now    func() time.Time
}

func (s *refusingSource) Token(context.Context) (tokensource.Token, error) {
	s.calls.Add(1)
	if !s.accept.Load() {
		return tokensource.Token{}, &tokensource.Error{Grant: "password", Status: 401, Code: "invalid_grant"}
	}
	now := s.now()
	return tokensource.Token{AccessToken: "t", IssuedAt: now, Expiry: now.Add(time.Hour)}, nil
}
func (s *refusingSource) Invalidate(tokensource.Token) {}

// A refused password is tried again after seconds doubling to minutes:
// callers asking every second for an hour cause 20 logins (at 0, 1, 3, 7,
// … 255 and 511 s, then every 5 minutes), not 900, which a partner's
// brute-force lockout would count.
func TestCacheBacksOffRefusedGrantsToMinutes(t *testing.T) {
	clk := newClock()
	src := &refusingSource{now: clk.Now}
	c := tokensource.NewCache(src, tokensource.CacheOptions{Now: clk.Now})
	ctx := context.Background()
	for range 3600 {
		if _, err := c.Token(ctx); err == nil {
			t.Fatal("a refused grant gave a token")
		}
		clk.Advance(time.Second)
	}
	if n := src.calls.Load(); n > 20 {
		t.Fatalf("%d refused logins in an hour, want at most 20", n)
	}
	var be *tokensource.BackoffError
	if _, err := c.Token(ctx); !errors.As(err, &be) || be.Next > 5*time.Minute || tokensource.IsTransient(err) {
		t.Fatalf("during the back-off: %v", err)
	}
}

// A change of the credentials ends the back-off of a refusal at once:
// the next call tries them. Without a change, nothing is tried.
func TestCacheTriesChangedCredentialsAtOnce(t *testing.T) {
	clk := newClock()
	src := &refusingSource{now: clk.Now}
	var changed, asked atomic.Int64
	c := tokensource.NewCache(src, tokensource.CacheOptions{Now: clk.Now,
		CredentialsChanged: func() bool { asked.Add(1); return changed.Swap(0) == 1 }})
	ctx := context.Background()
	for range 3 { // one grant, then the back-off's first second
		if _, err := c.Token(ctx); err == nil {
			t.Fatal("a refused grant gave a token")
		}
		clk.Advance(300 * time.Millisecond)
	}
	if src.calls.Load() != 1 || asked.Load() != 3 {
		t.Fatalf("%d grants, %d questions", src.calls.Load(), asked.Load())
	}
	// The operator rewrites the password file with the right password.
	src.accept.Store(true)
	changed.Store(1)
	if _, err := c.Token(ctx); err != nil {
		t.Fatalf("with changed credentials: %v", err)
	}
	if src.calls.Load() != 2 || c.Health() != nil {
		t.Fatalf("%d grants; Health %v", src.calls.Load(), c.Health())
	}
}

// The refused back-off is bounded by MaxRefusedBackoff, which also bounds
// its first step; a transient failure keeps the short back-off.
func TestCacheRefusedBackoffCap(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      tokensource.CacheOptions
		transient bool
		want      string // seconds of the grants in the first 30 s
	}{
		{"refused, cap 2 s", tokensource.CacheOptions{MaxRefusedBackoff: 2 * time.Second}, false, "[0 1 3 5 7 9 11 13 15 17 19 21 23 25 27 29]"},
		{"refused, defaults", tokensource.CacheOptions{}, false, "[0 1 3 7 15]"},
		{"transient, defaults", tokensource.CacheOptions{}, true, "[0 1 3 7 11 15 19 23 27]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			tc.opts.Now = clk.Now
			src := tokensource.Source(&refusingSource{now: clk.Now})
			if tc.transient {
				cs := &countingSource{now: clk.Now, ttl: time.Minute}
				cs.fail.Store(true)
				src = cs
			}
			c := tokensource.NewCache(src, tc.opts)
			var at []int
			for sec := range 30 {
				before := grants(src)
				_, _ = c.Token(context.Background())
				if grants(src) > before {
					at = append(at, sec)
				}
				clk.Advance(time.Second)
			}
			if fmt.Sprint(at) != tc.want {
				t.Fatalf("grants at %v s, want %s", at, tc.want)
			}
		})
	}
}

func grants(s tokensource.Source) int64 {
	switch s := s.(type) {
	case *refusingSource:
		return s.calls.Load()
	case *countingSource:
		return s.calls.Load()
	}
	return -1
}
