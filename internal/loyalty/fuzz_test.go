package loyalty

import (
	"errors"
	"testing"
	"time"
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
				if !errors.As(err, &me) {
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
		_ = parseRetryAfter(string(body))
	})
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
