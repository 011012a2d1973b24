// Built only with -tags sim until internal/sim lands (it is being written in
// parallel against the API these tests use); then drop the constraint.

package loyalty_test

// Tests against the simulator over HTTP (internal/sim behind httptest).

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/callimit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

type simEnv struct {
	sim    *sim.Server
	srv    *httptest.Server
	client *loyalty.Client
	cache  *tokensource.Cache
	signer *signing.Signer
	sleeps *sleeps
	logs   *observer.ObservedLogs
	// seen records every access and refresh token handed out.
	seen *recordingSource
}

type simConfig struct {
	simOpts  sim.Options
	now      func() time.Time
	mod      func(*loyalty.Options)
	password string
	exchange bool
	// profile is the bridge side's partner profile (signer and client);
	// the simulator's is simOpts.Profile.
	profile partnerprofile.Profile
}

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newSimEnv(t testing.TB, cfg simConfig) *simEnv {
	t.Helper()
	key := ecKey(t)
	e := &simEnv{sleeps: &sleeps{}}
	var err error
	if e.signer, err = signing.New(key, signing.Options{Issuer: sim.DefaultClientID, KID: "partner-1", Now: cfg.now, Profile: cfg.profile}); err != nil {
		t.Fatal(err)
	}
	so := cfg.simOpts
	if so.Members == 0 {
		so.Members = 20
	}
	if so.InitialBalance == 0 {
		so.InitialBalance = 100000
	}
	so.PartnerKeys = append(so.PartnerKeys, sim.PartnerKey{KID: "partner-1", Key: e.signer.PublicKey()})
	if cfg.now != nil {
		so.Now = cfg.now
	}
	if e.sim, err = sim.New(so); err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.sim)
	core, logs := observer.New(zap.DebugLevel)
	e.logs = logs
	log := zap.New(core)
	hc, err := loyalty.NewHTTPClient(loyalty.TransportOptions{MaxConns: 64})
	if err != nil {
		t.Fatal(err)
	}
	var grant tokensource.Source
	if cfg.exchange {
		grant, err = tokensource.NewExchange(tokensource.ExchangeOptions{BaseURL: e.srv.URL, Signer: e.signer, HTTPClient: hc, Now: cfg.now,
			LifetimeUnit: cfg.profile.TokenLifetimeUnit.Duration()})
	} else {
		pw := cfg.password
		if pw == "" {
			pw = sim.DefaultPassword
		}
		grant, err = tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: e.srv.URL, ClientID: sim.DefaultClientID,
			ClientSecret: sim.DefaultClientSecret, Username: sim.DefaultUsername, Password: pw, HTTPClient: hc, Now: cfg.now, Logger: log,
			LifetimeUnit: cfg.profile.TokenLifetimeUnit.Duration()})
	}
	if err != nil {
		t.Fatal(err)
	}
	e.seen = &recordingSource{src: grant}
	e.cache = tokensource.NewCache(e.seen, tokensource.CacheOptions{Now: cfg.now, Logger: log})
	opts := loyalty.Options{BaseURL: e.srv.URL, Tokens: e.cache, HTTPClient: hc, Signer: e.signer, Logger: log,
		Timeout: 5 * time.Second, Sleep: e.sleeps.Sleep, Profile: cfg.profile}
	if cfg.mod != nil {
		cfg.mod(&opts)
	}
	if e.client, err = loyalty.New(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.sim.Close(); e.srv.Close(); hc.CloseIdleConnections() })
	return e
}

// recordingSource remembers every token value handed out, for the leak test.
type recordingSource struct {
	src tokensource.Source
	mu  sync.Mutex
	all []string
}

func (r *recordingSource) Token(ctx context.Context) (tokensource.Token, error) {
	t, err := r.src.Token(ctx)
	if err == nil {
		r.mu.Lock()
		r.all = append(r.all, t.AccessToken, t.RefreshToken)
		r.mu.Unlock()
	}
	return t, err
}
func (r *recordingSource) Invalidate(t tokensource.Token) { r.src.Invalidate(t) }
func (r *recordingSource) values() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.all...)
}

func accrualFor(member int, txID string) loyalty.AccrualRequest {
	return loyalty.AccrualRequest{LoyaltyID: sim.MemberID(member), TransactionID: txID,
		TransactionDate: loyalty.TransactionDate{Time: time.Now()}, TransactionAmount: 250000, TransactionCurrency: "VND"}
}

// 500 callers, a 2-second token on a shared fake clock: every round of
// calls after a clock step causes exactly one token call, and no 401 ever
// reaches a caller (or the simulator).
func TestSimConcurrentCallersOneTokenPerExpiry(t *testing.T) {
	clk := newFakeClock()
	e := newSimEnv(t, simConfig{now: clk.Now, simOpts: sim.Options{AccessTokenTTL: 2 * time.Second, RefreshTokenTTL: time.Hour}})
	const callers = 500
	round := func() {
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := range callers {
			wg.Go(func() {
				if _, _, err := e.client.CustomerInfo(context.Background(), sim.MemberID(i%20+1)); err != nil {
					if failed.Add(1) == 1 {
						t.Errorf("caller %d: %v", i, err)
					}
				}
			})
		}
		wg.Wait()
	}
	round()
	// Steps inside the refresh window (1.7 s of 2: proactive refresh while
	// the old token still serves) and past expiry (2.5 s: everyone waits
	// for the one grant).
	steps := []time.Duration{1700 * time.Millisecond, 2500 * time.Millisecond, 1700 * time.Millisecond, 2500 * time.Millisecond, 3 * time.Second}
	for _, d := range steps {
		clk.Advance(d)
		round()
	}
	if got, want := e.sim.TokensIssued(), 1+len(steps); got != want {
		t.Fatalf("token calls %d, want %d (one per expiry)", got, want)
	}
	if n := e.sim.Calls("user-profile", http.StatusUnauthorized); n != 0 {
		t.Fatalf("%d calls answered 401", n)
	}
	if n := e.sim.Calls("user-profile", http.StatusOK); n != callers*(1+len(steps)) {
		t.Fatalf("%d successful calls, want %d", n, callers*(1+len(steps)))
	}
}

// The same with a real 4-second token: callers run until three tokens
// have been issued (polled, no sleeps). No error surfaces, and token calls
// stay one per lifetime however many callers there are. The JWT's exp is in
// whole seconds, so a "4 s" token really lives between 3 and 4 s. A call
// that waits longer than its token lives is answered 401 and renewed once;
// under the race detector on a loaded machine a call can wait over a
// second twice in a row, which a 2 s token (1 to 2 s of life) turned into
// a failure about one run in six.
func TestSimRealShortTTLUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("real-clock token expiry")
	}
	e := newSimEnv(t, simConfig{simOpts: sim.Options{AccessTokenTTL: 4 * time.Second, RefreshTokenTTL: time.Minute}})
	const callers = 200
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls, failures atomic.Int64
	start := time.Now()
	for i := range callers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _, err := e.client.CustomerInfo(context.Background(), sim.MemberID(i%20+1))
				calls.Add(1)
				if err != nil && failures.Add(1) == 1 {
					t.Errorf("caller %d: %v", i, err)
				}
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.sim.TokensIssued() < 3 && time.Now().Before(deadline) && failures.Load() == 0 {
		time.Sleep(10 * time.Millisecond) // polling the counter, not synchronising
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	issued := e.sim.TokensIssued()
	if issued < 3 {
		t.Fatalf("only %d tokens in 30 s", issued)
	}
	// Every token lives at least 3 s (see above) and is renewed once, by a
	// proactive refresh or by the first 401: more grants than elapsed/3 s
	// (+1 for the first, +1 for an edge) would mean callers refresh on
	// their own.
	if limit := int(elapsed/(3*time.Second)) + 2; issued > limit {
		t.Fatalf("%d token calls in %s with %d callers: more than one per expiry (limit %d)", issued, elapsed, callers, limit)
	}
	t.Logf("%d calls by %d callers, %d token calls, %d answered 401 and renewed, in %s", calls.Load(), callers, issued,
		e.sim.Calls("user-profile", http.StatusUnauthorized), elapsed.Round(time.Millisecond))
}

func TestSimRetryAfterObeyed(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var e *simEnv
			e = newSimEnv(t, simConfig{mod: func(o *loyalty.Options) {
				o.Sleep = func(ctx context.Context, d time.Duration) error {
					_ = e.sleeps.Sleep(ctx, d)
					if len(e.sleeps.All()) == 2 {
						e.sim.SetFaults(sim.Faults{}) // the service recovers
					}
					return nil
				}
			}})
			e.sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{status: 1}, RetryAfter: 2 * time.Second, Endpoints: []string{"point-accrual"}})
			res, info, err := e.client.Accrue(context.Background(), accrualFor(1, "tx-retry"))
			if err != nil {
				t.Fatal(err)
			}
			if got := e.sleeps.All(); len(got) != 2 || got[0] != 2*time.Second || got[1] != 2*time.Second {
				t.Fatalf("waits %v, want the server's 2 s twice", got)
			}
			if info.Attempts != 3 || e.sim.Calls("point-accrual", status) != 2 || e.sim.Effects("tx-retry") != 1 || res.TransactionID != "tx-retry" {
				t.Fatalf("info %+v, %d answered %d, effects %d", info, e.sim.Calls("point-accrual", status), status, e.sim.Effects("tx-retry"))
			}
		})
	}
}

func TestSimRetriesExhausted(t *testing.T) {
	e := newSimEnv(t, simConfig{mod: func(o *loyalty.Options) { o.Retry.MaxAttempts = 3 }})
	e.sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, RetryAfter: time.Second, Endpoints: []string{"point-accrual"}})
	_, info, err := e.client.Accrue(context.Background(), accrualFor(1, "tx-exhaust"))
	var te *loyalty.TransientError
	if !errors.As(err, &te) || te.Ambiguous || te.Status != 503 || info.Attempts != 3 || e.sim.Effects("tx-exhaust") != 0 {
		t.Fatalf("err %v info %+v", err, info)
	}
	if loyalty.Category(err) != loyalty.CategoryTransientExhausted {
		t.Fatal(loyalty.Category(err))
	}
}

func TestSimBusinessErrorsAtOnce(t *testing.T) {
	e := newSimEnv(t, simConfig{simOpts: sim.Options{InitialBalance: 100}})
	ctx := context.Background()
	if _, _, err := e.client.Accrue(ctx, accrualFor(2, "dup-1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.client.Link(ctx, loyalty.LinkRequest{LoyaltyID: sim.MemberID(3), PartnerMemberID: "P-3"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		endpoint string
		call     func() (loyalty.CallInfo, error)
		want     loyalty.Code
	}{
		{"unknown member", "user-profile", func() (loyalty.CallInfo, error) {
			_, i, err := e.client.CustomerInfo(ctx, "LB99999999")
			return i, err
		}, loyalty.ErrMemberNotFound},
		{"insufficient", "point-redemption", func() (loyalty.CallInfo, error) {
			_, i, err := e.client.Redeem(ctx, loyalty.RedemptionRequest{TransactionID: "r-big", LoyaltyID: sim.MemberID(1),
				TransactionDate: "2026-11-22T10:00:00Z", TransactionAmount: 1, UsedPoint: 1_000_000})
			return i, err
		}, loyalty.ErrInsufficientPoint},
		{"duplicate", "point-accrual", func() (loyalty.CallInfo, error) {
			_, i, err := e.client.Accrue(ctx, accrualFor(2, "dup-1"))
			return i, err
		}, loyalty.ErrDuplicateTransaction},
		{"already linked", "link-member", func() (loyalty.CallInfo, error) {
			_, i, err := e.client.Link(ctx, loyalty.LinkRequest{LoyaltyID: sim.MemberID(3), PartnerMemberID: "P-3"})
			return i, err
		}, loyalty.ErrMemberIsLinked},
		{"not linked", "unlink-member", func() (loyalty.CallInfo, error) {
			_, i, err := e.client.Unlink(ctx, loyalty.LinkRequest{LoyaltyID: sim.MemberID(4), PartnerMemberID: "P-4"})
			return i, err
		}, loyalty.ErrMemberNotLinked},
		{"lookup unknown", "lookup-transaction", func() (loyalty.CallInfo, error) {
			_, i, err := e.client.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: sim.MemberID(1), TransactionID: "nope"})
			return i, err
		}, loyalty.ErrTransactionNotFound},
		{"onboarding refused", "onboard", func() (loyalty.CallInfo, error) {
			_, i, err := e.client.Onboard(ctx, loyalty.OnboardRequest{ExternalID: "ext-bad", Phone: "+84901234567", FullName: "A B", Gender: "robot"})
			return i, err
		}, loyalty.ErrOnboardingRejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.sim.TotalCalls(tc.endpoint)
			info, err := tc.call()
			var be *loyalty.BusinessError
			if !errors.As(err, &be) || !errors.Is(err, tc.want) || be.HTTPStatus != 400 {
				t.Fatalf("err %v, want %s", err, tc.want)
			}
			if info.Attempts != 1 || info.Ambiguous || e.sim.TotalCalls(tc.endpoint)-before != 1 {
				t.Fatalf("info %+v, %d calls", info, e.sim.TotalCalls(tc.endpoint)-before)
			}
			if tc.want == loyalty.ErrOnboardingRejected && (be.Code != "0001" || !strings.Contains(be.ResultURL, "errorCode=")) {
				t.Fatalf("onboarding error %+v", be)
			}
		})
	}
	if len(e.sleeps.All()) != 0 {
		t.Fatalf("business errors were retried: %v", e.sleeps.All())
	}
}

func TestSimHangCutByTimeoutIsAmbiguous(t *testing.T) {
	e := newSimEnv(t, simConfig{mod: func(o *loyalty.Options) { o.Timeout = 200 * time.Millisecond }})
	e.sim.SetFaults(sim.Faults{HangRate: 1, Endpoints: []string{"point-accrual"}})
	_, info, err := e.client.Accrue(context.Background(), accrualFor(1, "tx-hang"))
	if !loyalty.IsAmbiguous(err) || !info.Ambiguous || info.Attempts != 1 {
		t.Fatalf("err %v info %+v", err, info)
	}
	if e.sim.TotalCalls("point-accrual") != 1 {
		t.Fatalf("ambiguous write re-sent: %d calls", e.sim.TotalCalls("point-accrual"))
	}
}

// Apply-then-500: the write happened, the answer says it did not. The
// client reports it ambiguous and does not re-send; the guard's lookup
// finds it.
func TestSimApplyThen500IsAmbiguous(t *testing.T) {
	e := newSimEnv(t, simConfig{})
	e.sim.SetFaults(sim.Faults{ApplyThen500Rate: 1, Endpoints: []string{"point-accrual", "point-redemption"}})
	ctx := context.Background()
	_, info, err := e.client.Accrue(ctx, accrualFor(5, "tx-a500"))
	if !loyalty.IsAmbiguous(err) || !info.Ambiguous || info.Attempts != 1 || loyalty.HTTPStatus(err) != 500 {
		t.Fatalf("err %v info %+v", err, info)
	}
	_, info, err = e.client.Redeem(ctx, loyalty.RedemptionRequest{TransactionID: "tx-r500", LoyaltyID: sim.MemberID(5),
		TransactionDate: "2026-11-22T10:00:00Z", TransactionAmount: 10, UsedPoint: 5})
	if !loyalty.IsAmbiguous(err) || info.Attempts != 1 {
		t.Fatalf("redeem: err %v info %+v", err, info)
	}
	if e.sim.Effects("tx-a500") != 1 || e.sim.Effects("tx-r500") != 1 {
		t.Fatalf("effects %d %d", e.sim.Effects("tx-a500"), e.sim.Effects("tx-r500"))
	}
	e.sim.SetFaults(sim.Faults{})
	tx, _, err := e.client.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: sim.MemberID(5), TransactionID: "tx-a500"})
	if err != nil || tx.TransactionID != "tx-a500" || tx.BitReference == "" {
		t.Fatalf("lookup: %+v %v", tx, err)
	}
}

func TestSimSignatures(t *testing.T) {
	e := newSimEnv(t, simConfig{})
	ctx := context.Background()
	r := loyalty.RedemptionRequest{TransactionID: "tx-sign", LoyaltyID: sim.MemberID(6), TransactionDate: "2026-11-22T10:00:00+07:00",
		TransactionAmount: 99000.5, UsedPoint: 40, TransactionDes: "coffee"}
	res, _, err := e.client.Redeem(ctx, r)
	if err != nil {
		t.Fatalf("our sign refused: %v", err)
	}
	if res.UsedPoint != 40 || res.TransactionID != "tx-sign" {
		t.Fatalf("%+v", res)
	}
	stranger, _ := signing.New(ecKey(t), signing.Options{Issuer: sim.DefaultClientID, KID: "partner-1"})
	good := signing.Redemption{LoyaltyID: sim.MemberID(6), TransactionID: "tx-t", UsedPoint: 40, TransactionAmount: 1, TransactionDate: "d"}
	forged, _ := stranger.RedemptionSign(good)
	otherAmount := good
	otherAmount.UsedPoint = 1
	mismatched, _ := e.signer.RedemptionSign(otherAmount)
	valid, _ := e.signer.RedemptionSign(good)
	parts := strings.Split(valid, ".")
	flipped := parts[0] + "." + parts[1] + "." + flip(parts[2])
	for name, sign := range map[string]string{"unknown key": forged, "claims differ": mismatched, "bad signature": flipped} {
		_, info, err := e.client.Redeem(ctx, loyalty.RedemptionRequest{TransactionID: "tx-t", LoyaltyID: sim.MemberID(6),
			TransactionDate: "d", TransactionAmount: 1, UsedPoint: 40, Sign: sign})
		if !errors.Is(err, loyalty.ErrInvalidSign) || info.Attempts != 1 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if e.sim.Effects("tx-t") != 0 {
		t.Fatal("a tampered redemption was applied")
	}
}

func flip(s string) string {
	b := []byte(s)
	if b[len(b)/2] == 'A' {
		b[len(b)/2] = 'B'
	} else {
		b[len(b)/2] = 'A'
	}
	return string(b)
}

func TestSimExchangeGrant(t *testing.T) {
	e := newSimEnv(t, simConfig{exchange: true})
	if _, _, err := e.client.CustomerProfile(context.Background(), sim.MemberID(1)); err != nil {
		t.Fatal(err)
	}
	if e.sim.Calls("exchange-token", 200) != 1 {
		t.Fatalf("exchange calls %d", e.sim.Calls("exchange-token", 200))
	}
	// A partner key the simulator does not know is refused: an auth error.
	hc := &http.Client{}
	stranger, _ := signing.New(ecKey(t), signing.Options{Issuer: sim.DefaultClientID})
	x, _ := tokensource.NewExchange(tokensource.ExchangeOptions{BaseURL: e.srv.URL, Signer: stranger, HTTPClient: hc})
	c, _ := loyalty.New(loyalty.Options{BaseURL: e.srv.URL, Tokens: x, HTTPClient: hc})
	_, _, err := c.CustomerProfile(context.Background(), sim.MemberID(1))
	hc.CloseIdleConnections()
	if loyalty.Category(err) != loyalty.CategoryAuth {
		t.Fatalf("err %v", err)
	}
}

func TestSimRevokedTokensRenewedOnce(t *testing.T) {
	e := newSimEnv(t, simConfig{})
	ctx := context.Background()
	if _, _, err := e.client.CustomerInfo(ctx, sim.MemberID(1)); err != nil {
		t.Fatal(err)
	}
	e.sim.RevokeTokens()
	_, info, err := e.client.CustomerInfo(ctx, sim.MemberID(1))
	if err != nil || info.Attempts != 2 {
		t.Fatalf("err %v info %+v", err, info)
	}
}

// Every log line (debug included) and every error string of a run through
// successes, faults, bad credentials and signing is free of the client
// secret, the password, every token handed out and every sign.
func TestSimNoSecretInLogsOrErrors(t *testing.T) {
	e := newSimEnv(t, simConfig{mod: func(o *loyalty.Options) {
		o.Timeout = 200 * time.Millisecond
		o.Retry.MaxAttempts = 2
	}})
	ctx := context.Background()
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
		}
	}
	_, _, err := e.client.Redeem(ctx, loyalty.RedemptionRequest{TransactionID: "s-1", LoyaltyID: sim.MemberID(1),
		TransactionDate: "2026-11-22", TransactionAmount: 5, UsedPoint: 5})
	note(err)
	sign, _ := e.signer.RedemptionSign(signing.Redemption{LoyaltyID: sim.MemberID(1), TransactionID: "s-2", UsedPoint: 9})
	_, _, err = e.client.Redeem(ctx, loyalty.RedemptionRequest{TransactionID: "s-2", LoyaltyID: sim.MemberID(1),
		TransactionDate: "2026-11-22", TransactionAmount: 5, UsedPoint: 5, Sign: sign})
	note(err)
	e.sim.RevokeTokens()
	_, _, err = e.client.CustomerInfo(ctx, sim.MemberID(1))
	note(err)
	for _, f := range []sim.Faults{
		{ErrorRates: map[int]float64{503: 1}, RetryAfter: time.Second},
		{ErrorRates: map[int]float64{500: 1}},
		{ApplyThen500Rate: 1},
		{HangRate: 1},
		{DropRate: 1},
	} {
		e.sim.SetFaults(f)
		_, _, err = e.client.Accrue(ctx, accrualFor(2, fmt.Sprintf("s-f-%d", len(errs))))
		note(err)
		_, _, err = e.client.CustomerInfo(ctx, sim.MemberID(2))
		note(err)
	}
	e.sim.SetFaults(sim.Faults{})

	bad := newSimEnv(t, simConfig{password: "not-" + sim.DefaultPassword})
	_, _, err = bad.client.CustomerInfo(ctx, sim.MemberID(1))
	if loyalty.Category(err) != loyalty.CategoryAuth {
		t.Fatalf("bad password: %v", err)
	}
	note(err)

	secrets := append(e.seen.values(), sim.DefaultClientSecret, sim.DefaultPassword, "not-"+sim.DefaultPassword, sign, "eyJ")
	var texts []string
	texts = append(texts, errs...)
	for _, logs := range []*observer.ObservedLogs{e.logs, bad.logs} {
		for _, entry := range logs.All() {
			texts = append(texts, entry.Message+" "+fmt.Sprint(entry.ContextMap()))
		}
	}
	if len(texts) < 10 {
		t.Fatalf("only %d texts captured", len(texts))
	}
	for _, s := range texts {
		for _, secret := range secrets {
			if secret != "" && strings.Contains(s, secret) {
				t.Errorf("leak of %.8s… in %q", secret, s)
			}
		}
	}
}

// gate is a WriteGate of a test: wait and allowed answer its calls.
type gate struct {
	wait    func(ctx context.Context) error
	allowed func(ctx context.Context) bool
}

func (g gate) Wait(ctx context.Context) error   { return g.wait(ctx) }
func (g gate) Allowed(ctx context.Context) bool { return g.allowed(ctx) }

// TestSimWriteGate: the WriteGate is asked before each write attempt and
// never before a read; a write it refuses is not sent, and is not
// ambiguous (nothing reached the partner).
func TestSimWriteGate(t *testing.T) {
	var asked atomic.Int32
	refuse := errors.New("lease lapsed")
	e := newSimEnv(t, simConfig{mod: func(o *loyalty.Options) {
		o.Retry.MaxAttempts = 1
		o.MaxCalls = 4
		o.WriteGate = gate{
			wait: func(ctx context.Context) error {
				if asked.Add(1) > 1 {
					return refuse
				}
				return nil
			},
			allowed: func(context.Context) bool { return true },
		}
	}})
	ctx := context.Background()
	if _, _, err := e.client.Accrue(ctx, accrualFor(1, "tx-leased")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.client.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: sim.MemberID(1), TransactionID: "tx-leased"}); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the gate waited on %d times for a write and a read; want 1", n)
	}
	_, _, err := e.client.Accrue(ctx, accrualFor(1, "tx-refused"))
	if !errors.Is(err, refuse) || loyalty.IsAmbiguous(err) || e.sim.Effects("tx-refused") != 0 {
		t.Fatalf("refused write: err %v (ambiguous %v), %d effects; want the refusal, not ambiguous, none applied",
			err, loyalty.IsAmbiguous(err), e.sim.Effects("tx-refused"))
	}
}

// TestSimWriteGateWaitsWithoutASlot: a write waiting for its gate (a
// lease waiting for a heartbeat) holds no call slot: with the adaptive
// limit at 1, a read goes through meanwhile, and the limiter, which
// measures a call from its grant, is not told the wait as latency.
func TestSimWriteGateWaitsWithoutASlot(t *testing.T) {
	calls, err := callimit.New(callimit.Options{Max: 4, Initial: 1})
	if err != nil {
		t.Fatal(err)
	}
	waiting, open := make(chan struct{}), make(chan struct{})
	var inUseWhileWaiting atomic.Int32
	inUseWhileWaiting.Store(-1)
	e := newSimEnv(t, simConfig{mod: func(o *loyalty.Options) {
		o.Retry.MaxAttempts = 1
		o.Calls = calls
		o.WriteGate = gate{
			wait: func(ctx context.Context) error {
				inUseWhileWaiting.Store(int32(calls.InUse()))
				close(waiting)
				select {
				case <-open:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			},
			allowed: func(context.Context) bool { return true },
		}
	}})
	if calls.Limit() != 1 {
		t.Fatalf("limit %d; want 1", calls.Limit())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wrote := make(chan error, 1)
	go func() {
		_, _, err := e.client.Accrue(ctx, accrualFor(1, "tx-gated"))
		wrote <- err
	}()
	<-waiting
	if _, _, err := e.client.CustomerInfo(ctx, sim.MemberID(1)); err != nil {
		t.Fatalf("read while a write waits for its gate: %v", err)
	}
	if n := inUseWhileWaiting.Load(); n != 0 {
		t.Errorf("%d call slots held while the write waited for its gate; want 0", n)
	}
	if n := calls.InUse(); n != 0 {
		t.Errorf("%d call slots held after the read, the write still waiting; want 0", n)
	}
	close(open)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if n := e.sim.Effects("tx-gated"); n != 1 {
		t.Fatalf("gated write applied %d times; want 1", n)
	}
}

// TestSimWriteGateClosedWhileQueued: a gate that closed while the write
// waited for its slot sends the slot back and waits again; the write is
// sent once, after the gate opened again.
func TestSimWriteGateClosedWhileQueued(t *testing.T) {
	calls, err := callimit.New(callimit.Options{Max: 4, Initial: 1})
	if err != nil {
		t.Fatal(err)
	}
	var waits, checks atomic.Int32
	e := newSimEnv(t, simConfig{mod: func(o *loyalty.Options) {
		o.Retry.MaxAttempts = 1
		o.Calls = calls
		o.WriteGate = gate{
			wait: func(context.Context) error { waits.Add(1); return nil },
			allowed: func(context.Context) bool {
				if calls.InUse() != 1 {
					t.Errorf("gate checked with %d slots held; want the write's", calls.InUse())
				}
				return checks.Add(1) > 1 // lapsed at the first check
			},
		}
	}})
	if _, _, err := e.client.Accrue(context.Background(), accrualFor(1, "tx-requeued")); err != nil {
		t.Fatal(err)
	}
	if w, c := waits.Load(), checks.Load(); w != 2 || c != 2 {
		t.Errorf("gate waited %d times and checked %d; want 2 and 2", w, c)
	}
	if n := e.sim.Effects("tx-requeued"); n != 1 {
		t.Fatalf("write applied %d times; want 1", n)
	}
	if n := calls.InUse(); n != 0 {
		t.Errorf("%d call slots held after the write; want 0", n)
	}
}

// A partner may redeem a fractional usedPoint (the spec says only
// "positive number"); the client reads the lookup's fractional
// transactionPoint as the partner profile says.
func TestSimFractionalPoints(t *testing.T) {
	for _, tc := range []struct {
		frac partnerprofile.Fractions
		want int64 // -1: a malformed answer
	}{{partnerprofile.FractionsRefuse, -1}, {partnerprofile.FractionsRoundHalfUp, 13}} {
		t.Run(string(tc.frac), func(t *testing.T) {
			e := newSimEnv(t, simConfig{mod: func(o *loyalty.Options) { o.FractionalPoints = tc.frac }})
			// The bridge never redeems a fraction: another client of the
			// partner did, with a sign of its own.
			key := ecKey(t)
			e.sim.AddPartnerKey(sim.PartnerKey{KID: "other-client", Key: key.Public()})
			now := time.Now()
			tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": sim.DefaultClientID, "aud": signing.RedemptionSignAudience,
				"typ": signing.RedemptionSignType, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": "j-1",
				"loyaltyId": sim.MemberID(3), "transactionId": "R-half", "usedPoint": 12.5, "transactionAmount": 10,
				"transactionDate": "2026-11-27T10:00:00.000Z"})
			tok.Header["kid"] = "other-client"
			sign, err := tok.SignedString(key)
			if err != nil {
				t.Fatal(err)
			}
			access, err := e.cache.Token(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			body := fmt.Sprintf(`{"transactionId":"R-half","transactionDate":"2026-11-27T10:00:00.000Z","transactionAmount":10,"loyaltyId":%q,"usedPoint":12.5,"sign":%q}`,
				sim.MemberID(3), sign)
			req, _ := http.NewRequest(http.MethodPost, e.srv.URL+sim.PathRedemption, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			access.SetAuthHeader(req)
			hc := &http.Client{}
			defer hc.CloseIdleConnections()
			res, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("fractional redemption: %d %s", res.StatusCode, raw)
			}
			got, _, err := e.client.LookupTransaction(context.Background(), loyalty.LookupRequest{LoyaltyID: sim.MemberID(3), TransactionID: "R-half"})
			switch {
			case tc.want < 0:
				var me *loyalty.MalformedResponseError
				if !errors.As(err, &me) || !strings.Contains(err.Error(), "fractional") {
					t.Fatalf("want a malformed answer naming the fraction, got %v %v", got, err)
				}
			case err != nil || got.TransactionPoint != tc.want:
				t.Fatalf("got %+v %v, want %d points", got, err, tc.want)
			}
		})
	}
}

// otherPartner is a partner whose profile differs from the default in
// every open wire choice and JWT claim.
func otherPartner() partnerprofile.Profile {
	return partnerprofile.Profile{AccrualDateType: partnerprofile.DateString,
		RedemptionDateFormat: partnerprofile.DateEpochSeconds, RedemptionDateType: partnerprofile.DateNumber,
		UnsetKeyed: partnerprofile.KeyedNull,
		JWT: partnerprofile.JWT{Issuer: "shop-1",
			Sign:         partnerprofile.Claims{Audience: "loyalty", Type: partnerprofile.None, Lifetime: time.Minute, JTI: partnerprofile.JTITransactionID},
			PartnerToken: partnerprofile.Claims{Audience: "loyalty-identity", Type: "pt"},
			SignClaims: []partnerprofile.SignClaim{{Field: "transactionId", Claim: "txn"}, {Field: "usedPoint", Encoding: partnerprofile.ClaimAsString},
				{Field: "transactionDate"}, {Field: "loyaltyId"}}}}
}

// A bridge set to another partner's profile works against a simulator
// that requires that profile, every write and the exchange grant
// included; against a simulator of the default profile it fails naming
// the claim refused.
func TestSimOtherPartnerProfile(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	e := newSimEnv(t, simConfig{exchange: true, profile: otherPartner(),
		simOpts: sim.Options{Profile: otherPartner(), StrictWire: true}})
	if _, _, err := e.client.Accrue(ctx, loyalty.AccrualRequest{LoyaltyID: sim.MemberID(1), TransactionID: "T-1",
		TransactionDate: loyalty.TransactionDate{Time: at}, TransactionAmount: 10000}); err != nil {
		t.Fatalf("accrual: %v", err)
	}
	res, _, err := e.client.Redeem(ctx, loyalty.RedemptionRequest{LoyaltyID: sim.MemberID(1), TransactionID: "R-1",
		TransactionDate: otherPartner().RedemptionDate(at), TransactionAmount: 10, UsedPoint: 4})
	if err != nil || res.UsedPoint != 4 {
		t.Fatalf("redemption: %+v %v", res, err)
	}
	if _, _, err := e.client.Onboard(ctx, loyalty.OnboardRequest{Phone: "0901234567", FullName: "Nguyen Van An", Gender: "male",
		Birthday: "1990-01-31", IsKYC: true, IDNumber: "079201001234", PlaceOfIssue: "Ha Noi", PlaceOfBirth: "Hai Phong",
		IssueDate: "2020-01-15", ExpireDate: "2035-01-15", Nationality: "VNM", Address: "12 Ly Thuong Kiet", ExternalID: "P-1"}); err != nil {
		t.Fatalf("onboarding: %v", err)
	}

	// The same bridge against the default partner: the partner token is
	// refused at the exchange, naming the first claim refused (iss).
	d := newSimEnv(t, simConfig{exchange: true, profile: otherPartner(), simOpts: sim.Options{StrictWire: true}})
	_, err = d.cache.Token(ctx)
	if err == nil || !strings.Contains(err.Error(), "partner token iss is not "+sim.DefaultClientID) {
		t.Fatalf("want the partner token refused for its iss, got %v", err)
	}
	// With the issuer agreed, the aud is named.
	agreed := otherPartner()
	agreed.JWT.Issuer = ""
	d = newSimEnv(t, simConfig{exchange: true, profile: agreed, simOpts: sim.Options{StrictWire: true}})
	if _, err = d.cache.Token(ctx); err == nil || !strings.Contains(err.Error(), "partner token aud is not "+signing.PartnerTokenAudience) {
		t.Fatalf("want the partner token refused for its aud, got %v", err)
	}
	// A password-grant bridge of that profile gets its token; its
	// redemption date, a number, is refused, and with the date agreed its
	// sign is, naming the claim.
	d = newSimEnv(t, simConfig{profile: otherPartner(), simOpts: sim.Options{}})
	_, _, err = d.client.Redeem(ctx, loyalty.RedemptionRequest{LoyaltyID: sim.MemberID(1), TransactionID: "R-1",
		TransactionDate: otherPartner().RedemptionDate(at), TransactionAmount: 10, UsedPoint: 4})
	var be *loyalty.BusinessError
	if !errors.As(err, &be) || be.Code != sim.CodeInvalidRequest || !strings.Contains(be.Message, "transactionDate") {
		t.Fatalf("want the date refused, got %v", err)
	}
	agreed = otherPartner()
	agreed.RedemptionDateFormat, agreed.RedemptionDateType = "", ""
	d = newSimEnv(t, simConfig{profile: agreed, simOpts: sim.Options{}})
	_, _, err = d.client.Redeem(ctx, loyalty.RedemptionRequest{LoyaltyID: sim.MemberID(1), TransactionID: "R-1",
		TransactionDate: agreed.RedemptionDate(at), TransactionAmount: 10, UsedPoint: 4})
	if !errors.As(err, &be) || be.Code != sim.CodeInvalidSign || !strings.Contains(be.Message, "sign iss is not "+sim.DefaultClientID) {
		t.Fatalf("want the sign refused naming iss, got %v", err)
	}
}

// expires_in's unit is "not shown" in the spec: the bridge reads it as the
// profile's --partner-token-lifetime-unit says, from the token endpoint and
// exchange-token alike, and a simulator answering in either unit gives the
// token its real lifetime. Read in the wrong unit, a 90 s token would
// count as 25 h (milliseconds read as seconds) or expire at once.
func TestTokenLifetimeUnit(t *testing.T) {
	const ttl, refreshTTL = 90 * time.Second, 10 * time.Minute
	for _, unit := range []partnerprofile.LifetimeUnit{partnerprofile.LifetimeSeconds, partnerprofile.LifetimeMilliseconds} {
		for _, exchange := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s exchange=%v", unit, exchange), func(t *testing.T) {
				prof := partnerprofile.Profile{TokenLifetimeUnit: unit}
				e := newSimEnv(t, simConfig{exchange: exchange, profile: prof,
					simOpts: sim.Options{Profile: prof, AccessTokenTTL: ttl, RefreshTokenTTL: refreshTTL}})
				tok, err := e.seen.src.Token(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if tok.Lifetime() != ttl {
					t.Errorf("access token lifetime %s, want %s", tok.Lifetime(), ttl)
				}
				if !exchange && tok.RefreshExpiry.Sub(tok.IssuedAt) != refreshTTL {
					t.Errorf("refresh token lifetime %s, want %s", tok.RefreshExpiry.Sub(tok.IssuedAt), refreshTTL)
				}
			})
		}
	}
}
