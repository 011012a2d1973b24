package loyalty

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// simAnswer is a 2xx body the simulator answered, and the wire type it
// was decoded into.
type simAnswer struct {
	wire string // "accrual", "redemption" or "transaction"
	body []byte
}

// simAnswers calls the simulator over HTTP (an accrual, a redemption, and
// lookups of both by transactionId and by bitReference) and returns the
// bodies of its answers as they came off the wire.
func simAnswers(tb testing.TB) []simAnswer {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := signing.New(key, signing.Options{Issuer: sim.DefaultClientID, KID: "partner-1"})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := sim.New(sim.Options{Members: 2, InitialBalance: 100000,
		PartnerKeys: []sim.PartnerKey{{KID: "partner-1", Key: signer.PublicKey()}}})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer func() { s.Close(); srv.Close() }()
	rec := &recordAnswers{next: srv.Client().Transport}
	hc := &http.Client{Transport: rec}
	grant, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: srv.URL, ClientID: sim.DefaultClientID,
		ClientSecret: sim.DefaultClientSecret, Username: sim.DefaultUsername, Password: sim.DefaultPassword, HTTPClient: hc})
	if err != nil {
		tb.Fatal(err)
	}
	c, err := New(Options{BaseURL: srv.URL, Tokens: tokensource.NewCache(grant, tokensource.CacheOptions{}), HTTPClient: hc,
		Signer: signer, Timeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	member := sim.MemberID(1)
	var out []simAnswer
	take := func(wire string, err error) {
		tb.Helper()
		if err != nil {
			tb.Fatalf("%s: %v", wire, err)
		}
		out = append(out, simAnswer{wire, rec.last()})
	}
	a, _, err := c.Accrue(ctx, AccrualRequest{LoyaltyID: member, TransactionID: "fast-accrual-1",
		TransactionDes:  json.RawMessage(`{"channel":"bench","sku":"SKU-1","qty":1}`),
		TransactionDate: TransactionDate{Time: time.Now()}, TransactionAmount: 250000})
	take("accrual", err)
	r, _, err := c.Redeem(ctx, RedemptionRequest{TransactionID: "fast-redemption-1", LoyaltyID: member,
		TransactionDate: time.Now().UTC().Format("2006-01-02T15:04:05Z"), TransactionAmount: 1000, UsedPoint: 7})
	take("redemption", err)
	_, _, err = c.LookupTransaction(ctx, LookupRequest{LoyaltyID: member, TransactionID: "fast-accrual-1"})
	take("transaction", err)
	_, _, err = c.LookupTransaction(ctx, LookupRequest{LoyaltyID: member, BitReference: a.BitReference})
	take("transaction", err)
	_, _, err = c.LookupTransaction(ctx, LookupRequest{LoyaltyID: member, BitReference: r.BitReference})
	take("transaction", err)
	return out
}

// recordAnswers keeps the body of the last business answer.
type recordAnswers struct {
	next http.RoundTripper
	mu   sync.Mutex
	body []byte
}

func (r *recordAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, "/api-") {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	r.mu.Lock()
	r.body = b
	r.mu.Unlock()
	return resp, nil
}

func (r *recordAnswers) last() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body
}

// fastDecodeSeeds are bodies around the common shape. taken names the
// wire type whose fast path must take the body ("" when none must).
var fastDecodeSeeds = []struct {
	taken string
	body  string
}{
	{"accrual", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":1001,"transactionId":"t-1","bitReference":"BIT000000000001","loyaltyId":"LB00000001","timestamp":"2026-11-28T10:00:00.000Z","requestId":"r"}}`},
	{"accrual", " {\n \"statusCode\" : 200 ,\r\n\t\"message\":\"SUCCESS\", \"errors\" : null, \"data\":{ \"sponsorId\" : -1.5e+3 } } \n"},
	{"accrual", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":null,"transactionId":null}}`},
	{"accrual", `{"statusCode":200,"message":"SUCCESS","data":{}}`},
	{"accrual", "{\"data\":{\"requestId\":\" ~\x7f\"},\"message\":\"SUCCESS\",\"statusCode\":200}"},
	{"accrual", `{"statusCode":200,"message":"SUCCESS","data":null}`},
	{"accrual", `{"statusCode":null,"message":null}`},
	{"accrual", `{}`},
	{"accrual", `{"statusCode":201,"message":"OK","data":{"sponsorId":0}}`},
	{"redemption", `{"statusCode":200,"message":"SUCCESS","data":{"requestId":"r","transactionId":"t","bitReference":"B","usedPoint":12.5,"timestamp":"x"}}`},
	{"redemption", `{"statusCode":200,"message":"SUCCESS","data":{"usedPoint":123456789012345678901234567890e-10}}`},
	{"transaction", `{"statusCode":200,"message":"SUCCESS","data":{"transactionPoint":250,"transactionAmount":250000.5,"transactionSource":"PARTNER","transactionType":"ACCRUAL","transactionId":"t","bitReference":"B","sponsor":"S","status":"SUCCESS","transactionTime":"x","requestId":"r","timestamp":"y"}}`},
	{"transaction", `{"statusCode":200,"message":"SUCCESS","data":{"transactionPoint":-0,"transactionAmount":1E-400}}`},
	// Duplicates: encoding/json keeps the last.
	{"", `{"statusCode":200,"message":"X","message":"SUCCESS","data":{}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":1,"sponsorId":2}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":null,"data":{"sponsorId":2}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":2},"data":{"transactionId":"t"}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":2},"data":null}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":1,"sponsorId":null}}`},
	// Case variants: encoding/json matches them.
	{"", `{"StatusCode":200,"message":"SUCCESS","data":{}}`},
	{"", `{"statusCode":200,"MESSAGE":"SUCCESS","data":{}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","Data":{"SponsorId":7}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorID":7,"LoyaltyId":"L"}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"ſponsorId":7}}`},
	// Escapes and non-ASCII.
	{"", `{"statusCode":200,"message":"SUCC\u0045SS","data":{}}`},
	{"", `{"statusCode":200,"mess\u0061ge":"SUCCESS","data":{}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"transactionId":"a\"b\\c\/d\n"}}`},
	{"", "{\"statusCode\":200,\"message\":\"SUCCESS\",\"data\":{\"loyaltyId\":\"L\xff\xfe\"}}"},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"loyaltyId":"Nguyễn \u2028"}}`},
	{"", "{\"statusCode\":200,\"message\":\"SUCC\tESS\",\"data\":{}}"},
	{"", "\xef\xbb\xbf{\"statusCode\":200,\"message\":\"SUCCESS\",\"data\":{}}"},
	// Unknown keys and nested junk.
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":1,"extra":{"a":[1,{"b":null}],"c":true}}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":{"a":[1,2]}}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":[{"sponsorId":1}]}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":true}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":"x"}`},
	{"", `{"statusCode":200,"message":"SUCCESS","timestamp":"x","data":{}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","errors":{},"data":{}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","errors":[],"data":{}}`},
	{"", `{"statusCode":200,"errors":{"code":"X","message":"m"}}`},
	// Numbers: huge, not integers, in strings, broken.
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":1e999999999}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":` + strings.Repeat("9", 400) + `}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":"1001"}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":01}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":1.}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":-}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":1e}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":+1}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":NaN}}`},
	{"", `{"statusCode":200.0,"message":"SUCCESS","data":{}}`},
	{"", `{"statusCode":2e2,"message":"SUCCESS","data":{}}`},
	{"", `{"statusCode":"200","message":"SUCCESS","data":{}}`},
	{"", `{"statusCode":-200,"message":"SUCCESS","data":{}}`},
	{"", `{"statusCode":99999999999999999999,"message":"SUCCESS","data":{}}`},
	{"", `{"statusCode":true,"message":"SUCCESS","data":{}}`},
	{"", `{"statusCode":200,"message":1,"data":{}}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{"transactionId":7}}`},
	// Not one whole object.
	{"", `{"statusCode":200,"message":"SUCCESS","data":{}} x`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{}}{}`},
	{"", `{"statusCode":200,"message":"SUCCESS","data":{}`},
	{"", `{"statusCode":200,"message":"SUCCESS",}`},
	{"", `{"statusCode":200,,"message":"SUCCESS"}`},
	{"", `{"statusCode" 200}`},
	{"", `{"statusCode":200 "message":"SUCCESS"}`},
	{"", `{"data":nul}`},
	{"", `{"data":nullx}`},
	{"", `null`},
	{"", `[]`},
	{"", ``},
	{"", `not json`},
}

// FuzzFastDecode is the fast path's differential test: whenever
// fastDecode takes a body, its envelope deep-equals encoding/json's, for
// each wire type; when it declines, it leaves the envelope alone. The
// simulator's own answers, and the seeds marked so, must be taken, so
// that a fast path that always declined would fail.
func FuzzFastDecode(f *testing.F) {
	mustTake := map[string]string{}
	for _, a := range simAnswers(f) {
		f.Add(a.body)
		mustTake[string(a.body)] = a.wire
	}
	for _, s := range fastDecodeSeeds {
		f.Add([]byte(s.body))
		if s.taken != "" {
			mustTake[s.body] = s.taken
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		taken := map[string]bool{
			"accrual":     sameAsEncodingJSON[accrualWire](t, body),
			"redemption":  sameAsEncodingJSON[redemptionWire](t, body),
			"transaction": sameAsEncodingJSON[transactionWire](t, body),
		}
		if w, ok := mustTake[string(body)]; ok && !taken[w] {
			t.Fatalf("the %s fast path declined %q", w, body)
		}
	})
}

// sameAsEncodingJSON fails t unless fastDecode's envelope of body, when it
// takes it, deep-equals encoding/json's; it reports whether it took it.
func sameAsEncodingJSON[T any](t *testing.T, body []byte) bool {
	t.Helper()
	var fast envelope[T]
	if !fastDecode(body, &fast) {
		if !reflect.DeepEqual(fast, envelope[T]{}) {
			t.Fatalf("%T: declined %q but wrote %+v", fast, body, fast)
		}
		return false
	}
	var std envelope[T]
	if err := json.Unmarshal(body, &std); err != nil {
		t.Fatalf("%T: fast path took %q, which encoding/json refuses: %v", fast, body, err)
	}
	if !reflect.DeepEqual(fast, std) {
		t.Fatalf("%T: %q\nfast path:     %s\nencoding/json: %s", fast, body, dump(fast), dump(std))
	}
	return true
}

func dump[T any](env envelope[T]) string {
	if env.Data == nil {
		return fmt.Sprintf("%+v", env)
	}
	return fmt.Sprintf("%+v data %+v", env, *env.Data)
}

// TestFastDecodeSameErrors: through decodeData, a body the fast path takes
// and one it leaves to encoding/json give the same value or the same
// error, Ambiguous included.
func TestFastDecodeSameErrors(t *testing.T) {
	for _, body := range []string{
		`{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":1001,"transactionId":"t"}}`,
		`{"statusCode":200,"message":"SUCCESS","data":null}`,
		`{"statusCode":201,"message":"SUCCESS","data":{}}`,
		`{"statusCode":200,"message":"OK","data":{}}`,
		`{"statusCode":200,"message":"SUCCESS","errors":null,"data":{"sponsorId":1.5}}`,
	} {
		info := CallInfo{Status: 200}
		w, gotInfo, err := decodeData[accrualWire](epAccrual, "tx=t", &info, attemptResult{status: 200, body: []byte(body)})
		var env envelope[accrualWire]
		if !fastDecode([]byte(body), &env) {
			t.Fatalf("fast path declined %s", body)
		}
		// What decodeData gave before the fast path: encoding/json alone.
		var std envelope[accrualWire]
		if json.Unmarshal([]byte(body), &std) != nil {
			t.Fatalf("encoding/json refuses %s", body)
		}
		switch {
		case std.Data == nil, std.StatusCode != http.StatusOK, std.Message != SuccessMessage:
			var me *MalformedResponseError
			if err == nil || !errors.As(err, &me) || !me.Ambiguous || !gotInfo.Ambiguous {
				t.Errorf("%s: %v (info %+v), want an ambiguous malformed answer", body, err, gotInfo)
			}
		case err != nil || !reflect.DeepEqual(w, std.Data):
			t.Errorf("%s: %+v, %v; want %+v", body, w, err, std.Data)
		}
	}
}

// TestFastDecodeTruncated: every prefix of the simulator's answers and of
// the fuzz seeds (a body cut off by a dropped connection, or by the size
// limit; a number cut after its sign, point or exponent mark) is read as
// encoding/json reads it or declined, and never read past its end.
func TestFastDecodeTruncated(t *testing.T) {
	var bodies [][]byte
	for _, a := range simAnswers(t) {
		bodies = append(bodies, a.body)
	}
	for _, s := range fastDecodeSeeds {
		bodies = append(bodies, []byte(s.body))
	}
	bodies = append(bodies, []byte(`{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":-1.5e+3}}`))
	for _, b := range bodies {
		for n := range len(b) {
			cut := b[:n:n]
			sameAsEncodingJSON[accrualWire](t, cut)
			sameAsEncodingJSON[redemptionWire](t, cut)
			sameAsEncodingJSON[transactionWire](t, cut)
		}
	}
}
