package loyalty

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// FuzzDecodeAnswer feeds arbitrary HTTP statuses and bodies to the one
// place answers are decoded: it never panics, returns a value or an error
// (never both, never neither), every error has a category, and no error
// text carries the server's free text (errors.message may echo personal data).
func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []struct {
		status int
		body   string
	}{
		{200, `{"statusCode":200,"message":"OK","data":{"sponsorId":1,"transactionId":"t","bitReference":"b","loyaltyId":"L","timestamp":"x","requestId":"r"}}`},
		{200, `{"statusCode":200,"data":null}`},
		{200, `{"statusCode":200,"message":"SUCCESS","data":{"transactionPoint":12.5,"transactionAmount":1e3,"transactionType":"ACCRUAL","status":"SUCCESS"}}`},
		{200, `{"statusCode":200,"message":"SUCCESS","data":{"transactionPoint":-1e-41,"usedPoint":"7","sponsorId":1.5}}`},
		{200, `{"statusCode":201,"message":"SUCCESS","data":{"usedPoint":9223372036854775808}}`},
		{200, `{"statusCode":200,"message":"SUCCESS","data":false}`},
		{200, `{"errors":{"code":"X"}}`},
		{200, `not json`},
		{400, `{"statusCode":400,"message":"Bad Request","errors":{"code":"DUPLICATE_TRANSACTION","message":"phone +84900000000 exists","errorCode":"E"},"data":{"resultUrl":"u"}}`},
		{400, `{"statusCode":400,"errors":{"code":"MEMBER_IS_LINKED","name":"MemberIsLinkedException"}}`},
		{401, `{"errors":{"code":"UNAUTHORIZED"}}`},
		{403, ``},
		{404, `<html>`},
		{400, `{"errors":null}`},
		{400, `{"errors":{}}`},
	} {
		f.Add(s.status, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		status = 200 + abs(status)%400
		res := attemptResult{status: status, body: body}
		check := func(ok bool, err error) {
			if ok == (err != nil) {
				t.Fatalf("status %d: value %v and error %v", status, ok, err)
			}
			if err == nil {
				return
			}
			if Category(err) == CategoryInternal {
				var me *MalformedResponseError
				var re *RejectedError
				if !errors.As(err, &me) && !errors.As(err, &re) {
					t.Fatalf("uncategorised error %T: %v", err, err)
				}
			}
			var be *BusinessError
			if errors.As(err, &be) {
				quiet := *be
				quiet.Message = ""
				if quiet.Error() != be.Error() {
					t.Fatalf("error text depends on the server's message: %q", err.Error())
				}
			}
		}
		info := CallInfo{}
		a, _, err := decodeData[AccrualResult](epAccrual, "tx=t", &info, res)
		check(a != nil, err)
		tr, _, err := decodeData[Transaction](epLookup, "tx=t", &info, res)
		check(tr != nil, err)
		m, _, err := decodeData[MemberProfile](epUserProfile, "member=L", &info, res)
		check(m != nil, err)
		o, _, err := decodeData[OnboardedMember](epOnboard, "", &info, res)
		check(o != nil, err)
		// The wire types' numbers, converted under either fraction rule.
		for _, frac := range []partnerprofile.Fractions{partnerprofile.FractionsRefuse, partnerprofile.FractionsRoundHalfUp} {
			// As the endpoints do: a number the wire value refuses is a
			// malformed answer.
			if w, _, err := decodeData[transactionWire](epLookup, "tx=t", &info, res); err == nil {
				tr, err := w.value(frac)
				check(tr != nil, wrapMalformed(epLookup, &info, err))
			}
			if w, _, err := decodeData[redemptionWire](epRedemption, "tx=t", &info, res); err == nil {
				r, err := w.value(frac)
				check(r != nil, wrapMalformed(epRedemption, &info, err))
			}
		}
		if w, _, err := decodeData[accrualWire](epAccrual, "tx=t", &info, res); err == nil {
			a, err := w.value()
			check(a != nil, wrapMalformed(epAccrual, &info, err))
		}
		_ = parseRetryAfter(string(body))
	})
}

// wrapMalformed is err as the endpoint returns it (nil stays nil).
func wrapMalformed(ep endpoint, info *CallInfo, err error) error {
	if err == nil {
		return nil
	}
	return malformed(ep, "tx=t", info, err)
}

func abs(n int) int {
	if n < 0 {
		if n == -n { // the smallest int
			return 0
		}
		return -n
	}
	return n
}

// FuzzRetryAfter: any header value gives a wait between 0 and a day.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"1", "120", "-5", "Wed, 21 Oct 2015 07:28:00 GMT", "", "999999999999999999999", "1.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if d := parseRetryAfter(v); d < 0 || d > 24*time.Hour {
			t.Fatalf("Retry-After %q gives %s", v, d)
		}
	})
}

// staticTokens is a token source that never calls anyone.
type staticTokens struct{}

func (staticTokens) Token(context.Context) (tokensource.Token, error) {
	return tokensource.Token{AccessToken: "fuzz-token", TokenType: "Bearer", Expiry: time.Now().Add(time.Hour)}, nil
}
func (staticTokens) Invalidate(tokensource.Token) {}

// fuzzCalls are the client's endpoints with valid requests, indexed by the
// fuzzer's first argument; write reports whether the endpoint applies
// something.
var fuzzCalls = []struct {
	write bool
	call  func(*Client) (bool, CallInfo, error)
}{
	{false, func(c *Client) (bool, CallInfo, error) {
		v, i, err := c.CustomerInfo(context.Background(), "LB00000001")
		return v != nil, i, err
	}},
	{false, func(c *Client) (bool, CallInfo, error) {
		v, i, err := c.CustomerProfile(context.Background(), "LB00000001")
		return v != nil, i, err
	}},
	{true, func(c *Client) (bool, CallInfo, error) {
		v, i, err := c.Onboard(context.Background(), OnboardRequest{ExternalID: "ext-1", Phone: "+84900000009"})
		return v != nil, i, err
	}},
	{true, func(c *Client) (bool, CallInfo, error) {
		v, i, err := c.Link(context.Background(), LinkRequest{LoyaltyID: "LB1", PartnerMemberID: "P1"})
		return v != nil, i, err
	}},
	{true, func(c *Client) (bool, CallInfo, error) {
		_, i, err := c.Unlink(context.Background(), LinkRequest{LoyaltyID: "LB1", PartnerMemberID: "P1"})
		return err == nil, i, err
	}},
	{true, func(c *Client) (bool, CallInfo, error) {
		v, i, err := c.Redeem(context.Background(), RedemptionRequest{TransactionID: "tx-9", LoyaltyID: "LB1",
			TransactionDate: "2025-11-22T10:00:00Z", UsedPoint: 10, Sign: "x.y.z"})
		return v != nil, i, err
	}},
	{true, func(c *Client) (bool, CallInfo, error) {
		v, i, err := c.Accrue(context.Background(), AccrualRequest{LoyaltyID: "LB00000001", TransactionID: "tx-1",
			TransactionDate: TransactionDate{Time: time.UnixMilli(1763805600123)}, TransactionAmount: 150000})
		return v != nil, i, err
	}},
	{false, func(c *Client) (bool, CallInfo, error) {
		v, i, err := c.LookupTransaction(context.Background(), LookupRequest{LoyaltyID: "LB1", TransactionID: "tx-1"})
		return v != nil, i, err
	}},
}

// FuzzClientAnswer runs every endpoint of the real client against an HTTP
// server answering an arbitrary status, Retry-After and body (the same for
// every attempt, so retries, the 401 renewal and the decoding all run):
// never a panic, a value or an error (never both, never neither), every
// error categorised, an ambiguous outcome only for a write that failed,
// and no error text carrying the server's free-text message.
func FuzzClientAnswer(f *testing.F) {
	for i, s := range []struct {
		status int
		retry  string
		body   string
	}{
		{200, "", `{"statusCode":200,"message":"OK","data":{"loyaltyId":"LB00000001","transactionId":"t","bitReference":"B","points":5}}`},
		{200, "", `{"statusCode":200,"data":true}`},
		{200, "", `{"statusCode":200,"data":{"members":[{"loyaltyId":"L"}]}}`},
		{400, "", `{"statusCode":400,"message":"Bad Request","errors":{"code":"MEMBER_IS_LINKED","message":"canary +84900000000","name":"MemberIsLinkedException"}}`},
		{400, "", `{"statusCode":400,"errors":{"code":"0001","message":"x","errorCode":"BAD_REQUEST"},"data":{"resultUrl":"https://p.example/r"}}`},
		{401, "", `{"statusCode":401,"errors":{"code":"UNAUTHORIZED"}}`},
		{429, "2", `{"statusCode":429}`},
		{503, "Wed, 21 Oct 2015 07:28:00 GMT", ``},
		{500, "", `{"statusCode":500,"message":"Internal Server Error"}`},
		{204, "", ``},
	} {
		f.Add(uint8(i), s.status, s.retry, []byte(s.body))
	}
	var status atomic.Int64
	var retry atomic.Pointer[string]
	var body atomic.Pointer[[]byte]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if r := *retry.Load(); r != "" {
			w.Header().Set("Retry-After", r)
		}
		w.WriteHeader(int(status.Load()))
		_, _ = w.Write(*body.Load())
	}))
	f.Cleanup(srv.Close)
	c, err := New(Options{BaseURL: srv.URL, Tokens: staticTokens{}, HTTPClient: srv.Client(), Timeout: 5 * time.Second,
		Retry: RetryPolicy{MaxAttempts: 2}, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, st int, ra string, b []byte) {
		// net/http writes only statuses 200-599 as given (1xx are
		// informational); a header value must not break the line.
		st = 200 + abs(st)%400
		ra = strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f {
				return -1
			}
			return r
		}, ra)
		status.Store(int64(st))
		retry.Store(&ra)
		body.Store(&b)
		ep := fuzzCalls[int(which)%len(fuzzCalls)]
		ok, info, err := ep.call(c)
		if ok == (err != nil) {
			t.Fatalf("status %d: value %v and error %v", st, ok, err)
		}
		if info.Ambiguous && (err == nil || !ep.write) {
			t.Fatalf("status %d: ambiguous with error %v on a write %v", st, err, ep.write)
		}
		if err == nil {
			return
		}
		if Category(err) == CategoryInternal {
			var me *MalformedResponseError
			var re *RejectedError
			if !errors.As(err, &me) && !errors.As(err, &re) {
				t.Fatalf("uncategorised error %T: %v", err, err)
			}
		}
		var be *BusinessError
		if errors.As(err, &be) {
			quiet := *be
			quiet.Message = ""
			if quiet.Error() != be.Error() {
				t.Fatalf("error text depends on the server's message: %q", err.Error())
			}
		}
	})
}
