package loyalty_test

import (
	"context"
	"encoding/json"
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

	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tokens is a Source handing out "tok-N", renewed on Invalidate.
type tokens struct {
	mu          sync.Mutex
	n           int
	invalidated int
}

func (s *tokens) Token(context.Context) (tokensource.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		s.n = 1
	}
	return tokensource.Token{AccessToken: fmt.Sprintf("tok-%d", s.n), TokenType: "Bearer", Expiry: time.Now().Add(time.Hour)}, nil
}

func (s *tokens) Invalidate(t tokensource.Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.AccessToken == fmt.Sprintf("tok-%d", s.n) {
		s.n++
		s.invalidated++
	}
}

// sleeps records the waits the client asks for instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) All() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

type fixture struct {
	srv    *httptest.Server
	client *loyalty.Client
	sleeps *sleeps
	tokens *tokens
}

func newFixture(t *testing.T, h http.HandlerFunc, mod func(*loyalty.Options)) *fixture {
	t.Helper()
	f := &fixture{srv: httptest.NewServer(h), sleeps: &sleeps{}, tokens: &tokens{}}
	opts := loyalty.Options{BaseURL: f.srv.URL, Tokens: f.tokens, Sleep: f.sleeps.Sleep,
		Rand: func() float64 { return 0.5 }, Timeout: 2 * time.Second}
	if mod != nil {
		mod(&opts)
	}
	c, err := loyalty.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.client = c
	t.Cleanup(func() { c.Close(); f.srv.Close() })
	return f
}

func ok(w http.ResponseWriter, data string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"statusCode":200,"message":"SUCCESS","data":%s}`, data)
}

func fail(w http.ResponseWriter, status int, errs string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"statusCode":%d,"message":"Bad Request","errors":%s}`, status, errs)
}

var accrual = loyalty.AccrualRequest{LoyaltyID: "LB00000001", TransactionID: "tx-1",
	TransactionDate: loyalty.TransactionDate{Time: time.UnixMilli(1763805600123)}, TransactionAmount: 150000}

func TestCustomerInfoSendsTokenAndDecodes(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/api-user/partner/v1/user-profile/LB00000001" ||
			r.Header.Get("Authorization") != "Bearer tok-1" {
			w.WriteHeader(418)
			return
		}
		ok(w, `{"loyaltyId":"LB00000001","dateOfBirth":"01-02-1990","eKycStatus":"VERIFIED","phone":"+84900000001"}`)
	}, nil)
	p, info, err := f.client.CustomerInfo(context.Background(), "LB00000001")
	if err != nil {
		t.Fatal(err)
	}
	if p.LoyaltyID != "LB00000001" || p.EKYCStatus != "VERIFIED" || p.DateOfBirth != "01-02-1990" || info.Attempts != 1 || info.Status != 200 {
		t.Fatalf("%+v %+v", p, info)
	}
}

func TestAccrualBodyMatchesSpec(t *testing.T) {
	for _, tc := range []struct {
		format loyalty.DateFormat
		want   string
	}{
		{"", `1763805600123`},
		{loyalty.DateISO8601, `"2025-11-22T10:00:00.123Z"`},
	} {
		var got map[string]json.RawMessage
		f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Content-Type") != "application/json" {
				w.WriteHeader(415)
				return
			}
			_ = json.NewDecoder(r.Body).Decode(&got)
			ok(w, `{"sponsorId":7,"transactionId":"tx-1","bitReference":"BIT1","loyaltyId":"LB00000001","timestamp":"2025-11-22T10:00:00.000Z","requestId":"6f1c"}`)
		}, func(o *loyalty.Options) { o.AccrualDateFormat = tc.format })
		res, _, err := f.client.Accrue(context.Background(), accrual)
		if err != nil {
			t.Fatal(err)
		}
		if res.SponsorID != 7 || res.BitReference != "BIT1" {
			t.Fatalf("%+v", res)
		}
		if string(got["transactionDate"]) != tc.want || string(got["transactionCurrency"]) != `"VND"` ||
			string(got["transactionAmount"]) != `150000` {
			t.Fatalf("format %q: body %s", tc.format, got)
		}
		if _, present := got["itemId"]; present {
			t.Fatal("empty optional itemId sent")
		}
	}
}

func TestTransactionDateRoundTrip(t *testing.T) {
	for _, in := range []string{`1763805600123`, `"1763805600123"`, `"2025-11-22T10:00:00.123Z"`, `"2025-11-22T17:00:00.123+07:00"`} {
		var d loyalty.TransactionDate
		if err := json.Unmarshal([]byte(in), &d); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if d.Time.UnixMilli() != 1763805600123 {
			t.Fatalf("%s → %v", in, d.Time)
		}
	}
	var d loyalty.TransactionDate
	if err := json.Unmarshal([]byte(`"yesterday"`), &d); err == nil {
		t.Fatal("bad date accepted")
	}
	// Called directly (json.Unmarshal never passes nothing), an empty or
	// blank value is an error, not a panic.
	for _, in := range []string{"", "  "} {
		if err := d.UnmarshalJSON([]byte(in)); err == nil {
			t.Fatalf("%q accepted", in)
		}
	}
}

func TestBusinessErrorsReturnAtOnceTyped(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		call   func(c *loyalty.Client) (loyalty.CallInfo, error)
		is     error
		check  func(*loyalty.BusinessError) bool
		linked bool
	}{
		{name: "linked", body: `{"code":"MEMBER_IS_LINKED","message":"Account has been linked","name":"MemberIsLinkedException"}`,
			call: func(c *loyalty.Client) (loyalty.CallInfo, error) {
				_, i, err := c.Link(context.Background(), loyalty.LinkRequest{LoyaltyID: "LB1", PartnerMemberID: "P1"})
				return i, err
			}, is: loyalty.ErrMemberIsLinked, linked: true},
		{name: "not-linked", body: `{"code":"MEMBER_IS_NOT_LINKED_YET","message":"not linked yet","name":"MemberIsNotLinkedException"}`,
			call: func(c *loyalty.Client) (loyalty.CallInfo, error) {
				_, i, err := c.Unlink(context.Background(), loyalty.LinkRequest{LoyaltyID: "LB1", PartnerMemberID: "P1"})
				return i, err
			}, is: loyalty.ErrMemberNotLinked},
		{name: "insufficient", body: `{"code":"INSUFFICIENT_POINT","message":"Not enough points","errorCode":"INSUFFICIENT_POINT"}`,
			call: func(c *loyalty.Client) (loyalty.CallInfo, error) {
				_, i, err := c.Redeem(context.Background(), loyalty.RedemptionRequest{TransactionID: "tx-9", LoyaltyID: "LB1",
					TransactionDate: "2025-11-22T10:00:00Z", UsedPoint: 10, Sign: "x.y.z"})
				return i, err
			}, is: loyalty.ErrInsufficientPoint},
		{name: "onboarding", body: `{"code":"0001","message":"Bad Request","errorCode":"BAD_REQUEST"},"data":{"resultUrl":"https://partner.example/result?errorCode=0001"}`,
			call: func(c *loyalty.Client) (loyalty.CallInfo, error) {
				_, i, err := c.Onboard(context.Background(), loyalty.OnboardRequest{ExternalID: "ext-1", Phone: "+84900000009"})
				return i, err
			}, is: loyalty.ErrOnboardingRejected,
			check: func(b *loyalty.BusinessError) bool {
				return b.ResultURL == "https://partner.example/result?errorCode=0001" && b.APICode() == "BAD_REQUEST"
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(w http.ResponseWriter, r *http.Request) { fail(w, 400, tc.body) }, nil)
			info, err := tc.call(f.client)
			var be *loyalty.BusinessError
			if !errors.As(err, &be) || !errors.Is(err, tc.is) || be.HTTPStatus != 400 || be.StatusCode != 400 || be.StatusMessage != "Bad Request" {
				t.Fatalf("err %v (%+v)", err, be)
			}
			if info.Attempts != 1 || info.Ambiguous || len(f.sleeps.All()) != 0 {
				t.Fatalf("info %+v sleeps %v", info, f.sleeps.All())
			}
			if loyalty.Category(err) != loyalty.CategoryBusiness || loyalty.Retryable(err) || loyalty.IsMemberLinked(err) != tc.linked {
				t.Fatalf("category %s", loyalty.Category(err))
			}
			if tc.check != nil && !tc.check(be) {
				t.Fatalf("%+v", be)
			}
			if strings.Contains(err.Error(), "+849") {
				t.Fatalf("error string carries a phone number: %v", err)
			}
		})
	}
}

func TestRetryAfterIsObeyedForWrites(t *testing.T) {
	for _, status := range []int{429, 503} {
		var n atomic.Int64
		f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) <= 2 {
				w.Header().Set("Retry-After", "3")
				fail(w, status, `{"code":"X","message":"busy"}`)
				return
			}
			ok(w, `{"transactionId":"tx-1","bitReference":"B"}`)
		}, nil)
		_, info, err := f.client.Accrue(context.Background(), accrual)
		if err != nil {
			t.Fatalf("%d: %v", status, err)
		}
		if got := f.sleeps.All(); len(got) != 2 || got[0] != 3*time.Second || got[1] != 3*time.Second || info.Attempts != 3 {
			t.Fatalf("%d: waits %v info %+v", status, got, info)
		}
	}
}

// Retry-After in either of its forms, delay-seconds or an HTTP date, is
// the wait before the retry, at most a day whatever the server asks (and
// MaxRetryAfter, a day and more here, caps it no further); a value that is
// neither, zero, negative or a date past leaves the back-off (rand 0.5 ×
// 100 ms).
func TestRetryAfterForms(t *testing.T) {
	const backoff = 50 * time.Millisecond
	date := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }
	for _, tc := range []struct {
		name     string
		value    string
		min, max time.Duration
	}{
		{"seconds", "120", 120 * time.Second, 120 * time.Second},
		{"seconds, spaced", " 7 ", 7 * time.Second, 7 * time.Second},
		{"an hour of seconds", "3600", time.Hour, time.Hour},
		{"seconds past a day", "100000", 24 * time.Hour, 24 * time.Hour},
		{"zero", "0", backoff, backoff},
		{"negative", "-5", backoff, backoff},
		{"neither", "soon", backoff, backoff},
		// An HTTP date has whole seconds: an hour ahead is less than an
		// hour by up to a second, and the time the test takes.
		{"date an hour ahead", date(time.Hour), time.Hour - time.Minute, time.Hour},
		{"date two days ahead", date(48 * time.Hour), 24 * time.Hour, 24 * time.Hour},
		{"date past", date(-time.Hour), backoff, backoff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					w.Header().Set("Retry-After", tc.value)
					w.WriteHeader(503)
					return
				}
				ok(w, `{"loyaltyId":"LB1"}`)
			}, func(o *loyalty.Options) {
				o.Retry = loyalty.RetryPolicy{Initial: 100 * time.Millisecond, MaxRetryAfter: 48 * time.Hour, MaxElapsed: 72 * time.Hour}
			})
			if _, _, err := f.client.CustomerInfo(context.Background(), "LB1"); err != nil {
				t.Fatal(err)
			}
			if got := f.sleeps.All(); len(got) != 1 || got[0] < tc.min || got[0] > tc.max {
				t.Fatalf("Retry-After %q: waits %v, want one in [%v, %v]", tc.value, got, tc.min, tc.max)
			}
		})
	}
}

func TestRetryAfterIsCapped(t *testing.T) {
	var n atomic.Int64
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(503)
			return
		}
		ok(w, `{"loyaltyId":"LB1"}`)
	}, func(o *loyalty.Options) { o.Retry.MaxRetryAfter = 7 * time.Second })
	if _, _, err := f.client.CustomerProfile(context.Background(), "LB1"); err != nil {
		t.Fatal(err)
	}
	if got := f.sleeps.All(); len(got) != 1 || got[0] != 7*time.Second {
		t.Fatalf("waits %v", got)
	}
}

func TestReadsBackOffWithFullJitterUntilExhausted(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) { fail(w, 502, `{"code":"X","message":"bad gateway"}`) },
		func(o *loyalty.Options) {
			o.Retry = loyalty.RetryPolicy{MaxAttempts: 5, Initial: 100 * time.Millisecond, Max: 300 * time.Millisecond}
		})
	_, info, err := f.client.LookupTransaction(context.Background(), loyalty.LookupRequest{LoyaltyID: "LB1", TransactionID: "tx-1"})
	var te *loyalty.TransientError
	if !errors.As(err, &te) || te.Ambiguous || te.Status != 502 || te.Attempts != 5 || info.Attempts != 5 || info.Ambiguous {
		t.Fatalf("err %v info %+v", err, info)
	}
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond, 150 * time.Millisecond}
	if got := f.sleeps.All(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v (rand 0.5 × min(max, initial·2ⁿ))", got, want)
	}
	if loyalty.Category(err) != loyalty.CategoryTransientExhausted || !loyalty.Retryable(err) {
		t.Fatal(loyalty.Category(err))
	}
}

// A back-off ceiling past Max waits Max, however Initial·2^(n−1)
// overflows: into a negative number (2^63) or into exactly zero (2^64, an
// Initial of 2^34 ns doubled 30 times), never into a retry at once.
func TestBackoffCeilingOverflowWaitsMax(t *testing.T) {
	const initial = time.Duration(1) << 34 // about 17 s
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }, func(o *loyalty.Options) {
		o.Retry = loyalty.RetryPolicy{MaxAttempts: 32, Initial: initial, Max: time.Minute, MaxElapsed: 1000 * time.Hour}
		o.Now = func() time.Time { return time.Unix(0, 0) }
	})
	if _, info, err := f.client.CustomerInfo(context.Background(), "LB1"); err == nil || info.Attempts != 32 {
		t.Fatalf("err %v info %+v, want 32 attempts", err, info)
	}
	// rand 0.5 × min(Max, Initial·2^(n−1)) for retries 1 to 31; retry 30's
	// ceiling is 2^63 (negative), retry 31's 2^64 (zero).
	want := []time.Duration{initial / 2, initial}
	for len(want) < 31 {
		want = append(want, 30*time.Second)
	}
	if got := f.sleeps.All(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
}

func TestMaxElapsedStopsRetries(t *testing.T) {
	now := time.Unix(0, 0)
	var mu sync.Mutex
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }, func(o *loyalty.Options) {
		o.Retry = loyalty.RetryPolicy{MaxAttempts: 100, MaxElapsed: 10 * time.Second}
		o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		o.Sleep = func(_ context.Context, d time.Duration) error { mu.Lock(); now = now.Add(d); mu.Unlock(); return nil }
		o.Rand = func() float64 { return 0.999 }
	})
	_, info, err := f.client.CustomerInfo(context.Background(), "LB1")
	if err == nil || info.Attempts >= 100 || info.Attempts < 3 {
		t.Fatalf("err %v attempts %d", err, info.Attempts)
	}
	mu.Lock()
	defer mu.Unlock()
	if now.Sub(time.Unix(0, 0)) > 10*time.Second {
		t.Fatalf("slept %v past MaxElapsed", now.Sub(time.Unix(0, 0)))
	}
}

// A retry that starts exactly at MaxElapsed starts ("no retry starts
// after" it); one a nanosecond later does not.
func TestMaxElapsedBoundary(t *testing.T) {
	for _, tc := range []struct {
		elapsed  time.Duration
		attempts int
	}{{50 * time.Millisecond, 2}, {50*time.Millisecond - 1, 1}} {
		var calls atomic.Int64
		f := newFixture(t, func(w http.ResponseWriter, r *http.Request) { calls.Add(1); w.WriteHeader(503) }, func(o *loyalty.Options) {
			// One back-off of 0.5 × 100 ms = 50 ms, on a clock that
			// stands still but for it.
			o.Retry = loyalty.RetryPolicy{MaxAttempts: 2, Initial: 100 * time.Millisecond, Max: 100 * time.Millisecond, MaxElapsed: tc.elapsed}
			o.Now = func() time.Time { return time.Unix(0, 0) }
		})
		if _, info, err := f.client.CustomerInfo(context.Background(), "LB1"); err == nil || info.Attempts != tc.attempts || calls.Load() != int64(tc.attempts) {
			t.Errorf("MaxElapsed %v: %d attempts (%d calls), want %d; %v", tc.elapsed, info.Attempts, calls.Load(), tc.attempts, err)
		}
	}
}

func TestServerErrorOnWriteIsAmbiguousAndNotResent(t *testing.T) {
	var n atomic.Int64
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		fail(w, 500, `{"code":"INTERNAL","message":"oops"}`)
	}, nil)
	_, info, err := f.client.Accrue(context.Background(), accrual)
	if !loyalty.IsAmbiguous(err) || !info.Ambiguous || info.Attempts != 1 || n.Load() != 1 {
		t.Fatalf("err %v info %+v calls %d", err, info, n.Load())
	}
	if !strings.Contains(err.Error(), "point-accrual tx=tx-1") {
		t.Fatalf("error does not name operation and transaction: %v", err)
	}
}

func TestHangIsCutByTimeout(t *testing.T) {
	release := make(chan struct{})
	var n atomic.Int64
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, func(o *loyalty.Options) {
		o.Timeout = 50 * time.Millisecond
		o.Retry.MaxAttempts = 2
	})
	defer close(release)
	_, info, err := f.client.Accrue(context.Background(), accrual)
	var te *loyalty.TransientError
	if !errors.As(err, &te) || !te.Ambiguous || !info.Ambiguous || info.Attempts != 1 || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write: err %v info %+v", err, info)
	}
	_, info, err = f.client.CustomerInfo(context.Background(), "LB1")
	if !errors.As(err, &te) || te.Ambiguous || info.Ambiguous || info.Attempts != 2 {
		t.Fatalf("read: err %v info %+v", err, info)
	}
}

func TestUnsentWriteIsRetried(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {}, func(o *loyalty.Options) { o.Retry.MaxAttempts = 3 })
	f.srv.Close() // connection refused: nothing was sent
	_, info, err := f.client.Accrue(context.Background(), accrual)
	if loyalty.IsAmbiguous(err) || info.Attempts != 3 || len(f.sleeps.All()) != 2 {
		t.Fatalf("err %v info %+v", err, info)
	}
	if strings.Contains(err.Error(), "127.0.0.1") && strings.Contains(err.Error(), "/api-point") {
		t.Fatalf("error repeats the URL: %v", err)
	}
}

func TestUnauthorizedRenewsTokenOnce(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer tok-1" {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"statusCode":401,"message":"Unauthorized","errors":{"code":"UNAUTHORIZED","message":"expired"}}`)
			return
		}
		ok(w, `{"loyaltyId":"LB1"}`)
	}, nil)
	_, info, err := f.client.CustomerProfile(context.Background(), "LB1")
	if err != nil || info.Attempts != 2 || f.tokens.invalidated != 1 || len(f.sleeps.All()) != 0 {
		t.Fatalf("err %v info %+v invalidated %d", err, info, f.tokens.invalidated)
	}

	always := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		fmt.Fprint(w, `{"statusCode":401,"message":"Unauthorized","errors":{"code":"UNAUTHORIZED","message":"no"}}`)
	}, nil)
	_, info, err = always.client.Accrue(context.Background(), accrual)
	var ae *loyalty.AuthError
	if !errors.As(err, &ae) || ae.HTTPStatus != 401 || ae.Code != "UNAUTHORIZED" || info.Attempts != 2 || info.Ambiguous {
		t.Fatalf("err %v info %+v", err, info)
	}
	if loyalty.Category(err) != loyalty.CategoryAuth {
		t.Fatal(loyalty.Category(err))
	}
}

func TestMalformedAnswers(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			fmt.Fprint(w, `<html>gateway</html>`)
			return
		}
		fmt.Fprint(w, `{"statusCode":200,"message":"SUCCESS"}`)
	}, nil)
	_, _, err := f.client.CustomerInfo(context.Background(), "LB1")
	var me *loyalty.MalformedResponseError
	if !errors.As(err, &me) || me.Ambiguous || loyalty.Category(err) != loyalty.CategoryInternal {
		t.Fatalf("read: %v", err)
	}
	_, info, err := f.client.Accrue(context.Background(), accrual)
	if !errors.As(err, &me) || !me.Ambiguous || !info.Ambiguous {
		t.Fatalf("write: %v %+v", err, info)
	}
}

func TestValidationBeforeAnyCall(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) { t.Error("called") }, nil)
	_, info, err := f.client.Redeem(context.Background(), loyalty.RedemptionRequest{LoyaltyID: "LB1", UsedPoint: 0})
	var ve *loyalty.ValidationError
	if !errors.As(err, &ve) || info.Attempts != 0 || loyalty.Category(err) != loyalty.CategoryValidation || len(ve.Problems) < 3 {
		t.Fatalf("%v", err)
	}
	_, _, err = f.client.LookupTransaction(context.Background(), loyalty.LookupRequest{LoyaltyID: "LB1"})
	if !errors.As(err, &ve) {
		t.Fatalf("%v", err)
	}
	// A redemption of no points, or of fewer, is refused on its own: it
	// would redeem nothing, or give points back.
	for _, used := range []int64{0, -5} {
		_, info, err := f.client.Redeem(context.Background(), loyalty.RedemptionRequest{TransactionID: "tx-1", LoyaltyID: "LB1",
			TransactionDate: "2025-11-22T10:00:00Z", UsedPoint: used, Sign: "x.y.z"})
		if !errors.As(err, &ve) || info.Attempts != 0 || fmt.Sprint(ve.Problems) != "[usedPoint must be positive]" {
			t.Fatalf("usedPoint %d: %v", used, err)
		}
	}
}

// An error names the record it is about, as the call knew it: the
// onboarding's externalId, a lookup's transactionId, or its bitReference
// when it has no transactionId.
func TestErrorsNameTheirRecord(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		fail(w, 400, `{"code":"X","message":"refused"}`)
	}, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		call func() error
		ref  string
	}{
		{func() error {
			_, _, err := f.client.Onboard(ctx, loyalty.OnboardRequest{ExternalID: "ext-1"})
			return err
		}, "externalId=ext-1"},
		{func() error {
			_, _, err := f.client.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: "LB1", BitReference: "B1"})
			return err
		}, "bitReference=B1"},
		{func() error {
			_, _, err := f.client.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: "LB1", TransactionID: "tx-1", BitReference: "B1"})
			return err
		}, "tx=tx-1"},
	} {
		var be *loyalty.BusinessError
		switch err := tc.call(); {
		case !errors.As(err, &be):
			t.Errorf("%v, want a business error", err)
		case be.Ref != tc.ref || !strings.Contains(err.Error(), " "+tc.ref+": "):
			t.Errorf("%v (ref %q), want ref %q", err, be.Ref, tc.ref)
		}
	}
}

func TestContextCancelStopsBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }, func(o *loyalty.Options) {
		o.Sleep = func(ctx context.Context, d time.Duration) error { cancel(); <-ctx.Done(); return ctx.Err() }
	})
	_, info, err := f.client.CustomerInfo(ctx, "LB1")
	if !errors.Is(err, context.Canceled) || info.Attempts != 1 {
		t.Fatalf("err %v info %+v", err, info)
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := loyalty.New(loyalty.Options{BaseURL: "ftp://x", Retry: loyalty.RetryPolicy{MaxAttempts: -1}, AccrualDateFormat: "rfc",
		FractionalPoints: "floor"})
	for _, want := range []string{"BaseURL", "Tokens", "negative", "AccrualDateFormat", "FractionalPoints"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not mention %s", err, want)
		}
	}
}

func TestResponseBodyIsBounded(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"statusCode":200,"message":"SUCCESS","data":{"loyaltyId":"`+strings.Repeat("x", 5<<20)+`"}}`)
	}, nil)
	if _, _, err := f.client.CustomerInfo(context.Background(), "LB1"); err == nil {
		t.Fatal("5 MiB answer accepted")
	}
}

// A redirect is never followed, whatever http.Client the caller gives:
// following it would re-send the body (personal data, signs) and the
// bearer token to the host it names. The error names the Location.
func TestRedirectNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	for _, hc := range []*http.Client{nil, {}} { // ours, and one that follows by default
		f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/steal?token=x", http.StatusTemporaryRedirect)
		}, func(o *loyalty.Options) { o.HTTPClient = hc; o.Retry = loyalty.RetryPolicy{MaxAttempts: 1} })
		_, _, err := f.client.Accrue(context.Background(), accrual)
		var me *loyalty.MalformedResponseError
		if !errors.As(err, &me) || me.HTTPStatus != 307 || !strings.Contains(err.Error(), "redirect 307 not followed (Location "+other.URL+"/steal)") {
			t.Errorf("client %v: %v", hc, err)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("%d requests reached the Location", n)
	}
}

// Every business call carries the two headers the spec lists as required
// for every endpoint of its Endpoints section, the bodiless GETs included.
func TestEveryCallSendsRequiredHeaders(t *testing.T) {
	type seen struct{ path, contentType, auth string }
	var (
		mu  sync.Mutex
		got []seen
	)
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization")})
		mu.Unlock()
		fail(w, 400, `{"code":"X","message":"refused"}`)
	}, nil)
	ctx := context.Background()
	calls := map[string]func() error{
		"user-profile":     func() error { _, _, err := f.client.CustomerInfo(ctx, "LB1"); return err },
		"user-profile-ext": func() error { _, _, err := f.client.CustomerProfile(ctx, "LB1"); return err },
		"onboard": func() error {
			_, _, err := f.client.Onboard(ctx, loyalty.OnboardRequest{ExternalID: "E1"})
			return err
		},
		"link-member": func() error {
			_, _, err := f.client.Link(ctx, loyalty.LinkRequest{LoyaltyID: "LB1", PartnerMemberID: "P1"})
			return err
		},
		"unlink-member": func() error {
			_, _, err := f.client.Unlink(ctx, loyalty.LinkRequest{LoyaltyID: "LB1", PartnerMemberID: "P1"})
			return err
		},
		"point-accrual": func() error { _, _, err := f.client.Accrue(ctx, accrual); return err },
		"point-redemption": func() error {
			_, _, err := f.client.Redeem(ctx, loyalty.RedemptionRequest{LoyaltyID: "LB1", TransactionID: "R1",
				TransactionDate: "2026-11-27T10:00:00.000Z", UsedPoint: 1, Sign: "ready-made"})
			return err
		},
		"lookup-transaction": func() error {
			_, _, err := f.client.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: "LB1", TransactionID: "T1"})
			return err
		},
	}
	for name, call := range calls {
		mu.Lock()
		got = nil
		mu.Unlock()
		var be *loyalty.BusinessError
		if err := call(); !errors.As(err, &be) {
			t.Fatalf("%s: want the stub's refusal, got %v", name, err)
		}
		mu.Lock()
		if len(got) != 1 || got[0].contentType != "application/json" || got[0].auth != "Bearer tok-1" {
			t.Errorf("%s: requests %+v, want one with Content-Type application/json and the bearer token", name, got)
		}
		mu.Unlock()
	}
}

// The profile's wire choices reach the body: each date in its format and
// JSON type, an unset idNumber or passportNumber left out or null.
func TestWireChoicesInBodies(t *testing.T) {
	at := time.UnixMilli(1763805600123)
	for _, tc := range []struct {
		name                 string
		prof                 partnerprofile.Profile
		accrual, redemption  string // transactionDate as sent
		passport, idNumber   string // as sent; "" when absent
		redemptionDateOnWire string // RedemptionRequest.TransactionDate
	}{
		{name: "default", accrual: `1763805600123`, redemption: `"2025-11-22T10:00:00.123Z"`, idNumber: `"079"`,
			redemptionDateOnWire: "2025-11-22T10:00:00.123Z"},
		{name: "strings and nulls", prof: partnerprofile.Profile{AccrualDateType: partnerprofile.DateString,
			RedemptionDateFormat: partnerprofile.DateEpochMillis, UnsetKeyed: partnerprofile.KeyedNull},
			accrual: `"1763805600123"`, redemption: `"1763805600123"`, idNumber: `"079"`, passport: `null`, redemptionDateOnWire: "1763805600123"},
		{name: "seconds as numbers, a layout", prof: partnerprofile.Profile{AccrualDateFormat: partnerprofile.DateEpochSeconds,
			RedemptionDateFormat: "layout:2006-01-02 15:04:05"},
			accrual: `1763805600`, redemption: `"2025-11-22 10:00:00"`, idNumber: `"079"`, redemptionDateOnWire: "2025-11-22 10:00:00"},
		{name: "redemption date a number", prof: partnerprofile.Profile{RedemptionDateFormat: partnerprofile.DateEpochSeconds,
			RedemptionDateType: partnerprofile.DateNumber},
			accrual: `1763805600123`, redemption: `1763805600`, idNumber: `"079"`, redemptionDateOnWire: "1763805600"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu  sync.Mutex
				got = map[string]map[string]json.RawMessage{}
			)
			f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
				var body map[string]json.RawMessage
				_ = json.NewDecoder(r.Body).Decode(&body)
				mu.Lock()
				got[r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]] = body
				mu.Unlock()
				fail(w, 400, `{"code":"X","message":"refused"}`)
			}, func(o *loyalty.Options) { o.Profile = tc.prof })
			ctx := context.Background()
			_, _, _ = f.client.Accrue(ctx, loyalty.AccrualRequest{LoyaltyID: "LB1", TransactionID: "T1", TransactionDate: loyalty.TransactionDate{Time: at}})
			rd := tc.prof.RedemptionDate(at)
			if rd != tc.redemptionDateOnWire {
				t.Fatalf("redemption date text %s", rd)
			}
			_, _, _ = f.client.Redeem(ctx, loyalty.RedemptionRequest{LoyaltyID: "LB1", TransactionID: "R1", TransactionDate: rd, UsedPoint: 1, Sign: "s"})
			_, _, _ = f.client.Onboard(ctx, loyalty.OnboardRequest{ExternalID: "E1", IDNumber: "079"})
			mu.Lock()
			defer mu.Unlock()
			onboard := got["onboard"]
			for what, pair := range map[string][2]string{
				"accrual date":    {string(got["point-accrual"]["transactionDate"]), tc.accrual},
				"redemption date": {string(got["point-redemption-with-token"]["transactionDate"]), tc.redemption},
				"idNumber":        {string(onboard["idNumber"]), tc.idNumber},
				"passportNumber":  {string(onboard["passportNumber"]), tc.passport},
			} {
				if pair[0] != pair[1] {
					t.Errorf("%s sent as %s, want %s", what, pair[0], pair[1])
				}
			}
			if _, keyed := onboard["passportNumber"]; keyed != (tc.passport != "") {
				t.Errorf("passportNumber keyed %v, want %v", keyed, tc.passport != "")
			}
		})
	}
	// A redemption date the profile sends as a number must be digits.
	f := newFixture(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) },
		func(o *loyalty.Options) {
			o.Profile = partnerprofile.Profile{RedemptionDateFormat: partnerprofile.DateEpochMillis, RedemptionDateType: partnerprofile.DateNumber}
		})
	_, info, err := f.client.Redeem(context.Background(), loyalty.RedemptionRequest{LoyaltyID: "LB1", TransactionID: "R1",
		TransactionDate: "2026-11-27", UsedPoint: 1, Sign: "s"})
	var ve *loyalty.ValidationError
	if !errors.As(err, &ve) || info.Attempts != 0 || !strings.Contains(err.Error(), "epoch-millis as a JSON number") {
		t.Fatalf("want a validation error before any call, got %v (%d attempts)", err, info.Attempts)
	}
}
