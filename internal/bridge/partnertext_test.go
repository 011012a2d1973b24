package bridge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// A partner's answer is untrusted text. Through the client, the bridge and
// the codec, what it echoes never reaches an output topic: a bearer token
// or a JWT in its messages or codes, an access_token in its resultUrl, and
// for an onboarding the member's data in the partner's own spelling (the
// phone nationally and spaced, the name in capitals, the birthday as the
// spec's dateOfBirth). An onboarding's error event keeps only the codes.
func TestPartnerTextsReachNoTopic(t *testing.T) {
	const (
		jwt    = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnLWNhbmFyeS10b2tlbg"
		secret = "sEcReT-canary-42"
	)
	// The onboarding canaries (harness_test.go) as a partner might write
	// them back.
	phoneSpaced, phoneDashed, phoneNational := "0987 650 001", "0987-650-001", "0987650001"
	nameUpper, dateOfBirth := strings.ToUpper(canaryName), "05-06-1987"
	if canaryPhone != "+84987650001" || canaryBirthday != "1987-06-05" {
		t.Fatal("the canaries changed: update the spellings")
	}
	tokens := []string{jwt, secret, "eyJ"}
	person := []string{phoneSpaced, phoneDashed, phoneNational, "987650001", nameUpper, dateOfBirth}

	type errorAnswer struct {
		StatusCode int    `json:"statusCode"`
		Message    string `json:"message"`
		Errors     struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			ErrorCode string `json:"errorCode,omitempty"`
		} `json:"errors"`
		Data struct {
			ResultURL string `json:"resultUrl"`
		} `json:"data"`
	}
	refusal := func(message, code, errMessage, errCode, url string) string {
		var a errorAnswer
		a.StatusCode, a.Message, a.Data.ResultURL = 400, message, url
		a.Errors.Code, a.Errors.Message, a.Errors.ErrorCode = code, errMessage, errCode
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	str := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	const r = events.Redacted
	s := newStack(t, stackOpts{})

	for _, tc := range []struct {
		name  string
		topic string
		ev    events.Event
		keep  []string // Profile.ResultURLParams
		ans   canned
		leaks []string
		check func(t *testing.T, rp reply)
	}{
		{name: "purchase: tokens in every text", topic: topics.Purchase, ev: purchase("pt-tok", 1, 100),
			ans: canned{"/point-accrual", http.StatusBadRequest, refusal("Bad Request: Bearer "+jwt, "E_AUTH",
				"token "+jwt+" refused; retry with access_token="+secret, "Bearer "+jwt,
				"https://partner.example/result?access_token="+secret+"&errorCode=E_AUTH#id_token="+secret)},
			leaks: tokens,
			check: func(t *testing.T, rp reply) {
				x := rp.err
				if str(x.APIMessage) != "Bad Request: Bearer "+r || str(x.APIErrorMessage) != "token "+r+" refused; retry with access_token="+r ||
					str(x.APIErrorName) != "Bearer "+r || str(x.APIErrorCode) != "E_AUTH" || str(x.ResultURL) != "https://partner.example/result" {
					t.Errorf("texts: message %q, errors.message %q, name %q, code %q, resultUrl %q",
						str(x.APIMessage), str(x.APIErrorMessage), str(x.APIErrorName), str(x.APIErrorCode), str(x.ResultURL))
				}
			}},
		{name: "purchase: the profile keeps errorCode", topic: topics.Purchase, ev: purchase("pt-keep", 1, 100),
			keep: []string{"errorCode"},
			ans: canned{"/point-accrual", http.StatusBadRequest, refusal("Bad Request", "E1", "no", "",
				"https://user:"+secret+"@partner.example/result?access_token="+secret+"&errorCode=E1")},
			leaks: tokens,
			check: func(t *testing.T, rp reply) {
				if got := str(rp.err.ResultURL); got != "https://partner.example/result?errorCode=E1" {
					t.Errorf("resultUrl %q", got)
				}
			}},
		{name: "purchase: control characters and length", topic: topics.Purchase, ev: purchase("pt-ctl", 1, 100),
			ans: canned{"/point-accrual", http.StatusBadRequest, refusal("Bad\nRequest\x1b[2J", strings.Repeat("C", 500), strings.Repeat("long ", 1000), "", "")},
			check: func(t *testing.T, rp reply) {
				x := rp.err
				if str(x.APIMessage) != "Bad Request[2J" || len(str(x.APIErrorMessage)) > 256 || len(str(x.APIErrorCode)) > 64 {
					t.Errorf("message %q, errors.message of %d bytes, code of %d", str(x.APIMessage), len(str(x.APIErrorMessage)), len(str(x.APIErrorCode)))
				}
			}},
		{name: "onboarding: only codes, the member in no spelling", topic: topics.MemberOnboarding, ev: onboarding("ob-echo", "ext-echo"),
			keep: []string{"phone"},
			ans: canned{"/user/onboard", http.StatusBadRequest, refusal("Bad Request for "+nameUpper+" Bearer "+jwt, "0001",
				fmt.Sprintf("phone %s of %s born %s is taken", phoneSpaced, nameUpper, dateOfBirth), "DUPLICATE_"+phoneDashed,
				sim.OnboardingResultURL+"?errorCode=DUPLICATE&phone="+phoneNational+"&access_token="+secret)},
			leaks: append(append([]string{}, tokens...), person...),
			check: func(t *testing.T, rp reply) {
				x := rp.err
				if x.APIMessage != nil || x.APIErrorMessage != nil || x.ResultURL != nil || str(x.APIErrorCode) != "0001" ||
					str(x.APIErrorName) != "DUPLICATE_"+r || x.APIStatusCode == nil || *x.APIStatusCode != 400 {
					t.Errorf("onboarding error event: %+v", x)
				}
				// The detail quotes the partner's codes: scrubbed too.
				if !strings.Contains(x.Detail, "DUPLICATE_"+r) {
					t.Errorf("detail %q", x.Detail)
				}
			}},
		{name: "accrual result: a token in the answer's ids", topic: topics.Purchase, ev: purchase("pt-res", 1, 100),
			ans: canned{"/point-accrual", http.StatusOK, `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":1001,` +
				`"transactionId":"pt-res","bitReference":"BIT000000000001","loyaltyId":"` + sim.MemberID(1) + `",` +
				`"timestamp":"2026-11-23T10:00:00.000Z","requestId":"req\u0000-Bearer ` + jwt + `"}}`},
			leaks: tokens,
			check: func(t *testing.T, rp reply) {
				if rp.result == nil || str(rp.result.RequestID) != "req-Bearer "+r || str(rp.result.BitReference) != "BIT000000000001" {
					t.Errorf("result %+v", rp.result)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := s.bridge(func(o *bridge.Options) { o.Profile = partnerprofile.Profile{ResultURLParams: tc.keep} })
			s.answer.Store(&tc.ans)
			rp := s.handle(b, s.record(tc.topic, tc.ev), true)
			if (rp.err == nil) != (tc.ans.status == http.StatusOK) {
				t.Fatalf("outcome %s", rp.outcome())
			}
			tc.check(t, rp)
			raw := string(rp.rec.Value) + fmt.Sprintf("%+v %+v", rp.result, rp.err)
			for _, h := range rp.rec.Headers {
				raw += h.Key + "=" + string(h.Value)
			}
			for _, l := range tc.leaks {
				if strings.Contains(raw, l) {
					t.Errorf("output carries %q: %+v %+v", l, rp.result, rp.err)
				}
			}
		})
	}
}
