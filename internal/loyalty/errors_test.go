package loyalty

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// One classifier decides what the circuit hears as an API failure.
func TestIsAPIFailure(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("accrual T-1: %w", context.Canceled), false},
		{&BusinessError{}, false},
		{&AuthError{}, false},
		{&ValidationError{}, false},
		{&TransientError{}, true},
		{fmt.Errorf("accrual T-1: %w", &TransientError{Status: 503}), true},
		{&MalformedResponseError{}, true},
		{&RejectedError{HTTPStatus: 404}, false},
		{fmt.Errorf("accrual T-1: %w", &RejectedError{HTTPStatus: 413}), false},
	} {
		if got := IsAPIFailure(tc.err); got != tc.want {
			t.Errorf("IsAPIFailure(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// The error texts that reach logs and error events: each part is there
// exactly when its field is set, so that an error event says what the
// partner answered (its codes, the HTTP status, the attempts made, the
// cause) and nothing empty stands for a missing part.
func TestErrorTexts(t *testing.T) {
	cause := errors.New("connection reset")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&BusinessError{Op: "point-accrual", Ref: "tx=T1", HTTPStatus: 400, Code: "INSUFFICIENT_POINT"},
			"loyalty: point-accrual tx=T1: business error (HTTP 400) INSUFFICIENT_POINT"},
		{&BusinessError{Op: "link-member", HTTPStatus: 400, Code: "MEMBER_IS_LINKED", Name: "MemberIsLinkedException"},
			"loyalty: link-member: business error (HTTP 400) MEMBER_IS_LINKED MemberIsLinkedException"},
		{&BusinessError{Op: "onboard", HTTPStatus: 400, ErrorCode: "BAD_REQUEST"},
			"loyalty: onboard: business error (HTTP 400) BAD_REQUEST"},
		{&BusinessError{Op: "unlink-member", HTTPStatus: 200, Data: "false"},
			"loyalty: unlink-member: business error (HTTP 200): answered data: false"},
		{&AuthError{Op: "user-profile", Ref: "member=LB1"}, "loyalty: user-profile member=LB1: not authorised"},
		{&AuthError{Op: "user-profile", HTTPStatus: 401}, "loyalty: user-profile: not authorised (HTTP 401)"},
		{&AuthError{Op: "user-profile", HTTPStatus: 403, Code: "FORBIDDEN"}, "loyalty: user-profile: not authorised (HTTP 403) FORBIDDEN"},
		{&AuthError{Op: "user-profile", Code: "invalid_grant", Err: cause},
			"loyalty: user-profile: not authorised invalid_grant: connection reset"},
		{&TransientError{Op: "point-accrual", Ref: "tx=T1"}, "loyalty: point-accrual tx=T1: not applied, before any request"},
		{&TransientError{Op: "point-accrual", Status: 503, Attempts: 1}, "loyalty: point-accrual: not applied, HTTP 503, after 1 attempt"},
		{&TransientError{Op: "point-accrual", Ambiguous: true, Attempts: 3, Err: cause},
			"loyalty: point-accrual: outcome unknown (may have been applied), after 3 attempts: connection reset"},
		{&UnrecognisedAnswerError{Op: "lookup-transaction", Ref: "tx=T1", Field: FieldStatus, Value: "PENDING"},
			`loyalty: lookup-transaction tx=T1: answer not in the partner profile: status "PENDING"`},
		{&UnrecognisedAnswerError{Op: "lookup-transaction", Ref: "tx=T1", Field: FieldSharedID, Value: "REDEMPTION"},
			`loyalty: lookup-transaction tx=T1: the transactionId names a transaction of the other kind (transactionType "REDEMPTION"); with transactions keyed by id and type, the one asked may exist beside it unseen`},
		{ErrInsufficientPoint, "loyalty: API error INSUFFICIENT_POINT"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%#v:\n got %q\nwant %q", tc.err, got, tc.want)
		}
	}
}

// APICode is the code that names a business error: errors.code unless it
// is absent or the onboarding's generic "0001", then errorCode, then name.
func TestAPICode(t *testing.T) {
	for _, tc := range []struct {
		be   BusinessError
		want string
	}{
		{BusinessError{Code: "INSUFFICIENT_POINT", ErrorCode: "E42", Name: "N"}, "INSUFFICIENT_POINT"},
		{BusinessError{Code: "0001", ErrorCode: "BAD_REQUEST"}, "BAD_REQUEST"},
		{BusinessError{ErrorCode: "E42", Name: "N"}, "E42"},
		{BusinessError{Name: "MemberIsLinkedException"}, "MemberIsLinkedException"},
		{BusinessError{Code: "0001"}, "0001"},
		{BusinessError{}, ""},
	} {
		if got := tc.be.APICode(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.be, got, tc.want)
		}
	}
}

// The partner refuses the bridge's credentials, not one record, when the
// grant failed or the API answered 401 (to a renewed token); a 403 is one
// resource forbidden, and no AuthError is no refusal.
func TestIsCredentialRefused(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&AuthError{Op: "point-accrual", Err: errors.New("invalid_grant")}, true},
		{fmt.Errorf("accrual T-1: %w", &AuthError{HTTPStatus: 401}), true},
		{&AuthError{HTTPStatus: 403, Code: "FORBIDDEN"}, false},
		{&AuthError{}, false},
		{&BusinessError{HTTPStatus: 401}, false},
		{&TransientError{Status: 401}, false},
		{nil, false},
	} {
		if got := IsCredentialRefused(tc.err); got != tc.want {
			t.Errorf("IsCredentialRefused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
