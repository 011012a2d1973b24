package loyalty

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// Code is an API error code (errors.code, errors.errorCode or errors.name
// of the error envelope). Codes are sentinels: errors.Is(err, ErrMemberIsLinked)
// is true for a *BusinessError carrying that code.
type Code string

func (c Code) Error() string { return "loyalty: API error " + string(c) }

// Codes the spec names, and those the simulator uses where the spec is
// silent. ErrDuplicateTransaction, ErrTransactionNotFound and
// ErrMemberNotFound are only the simulator's defaults: a partner names
// them as its partnerprofile.Profile says, which is what the bridge asks
// (ClassifyLookup, Profile.IsDuplicate).
const (
	ErrMemberIsLinked       Code = "MEMBER_IS_LINKED"
	ErrMemberNotLinked      Code = "MEMBER_IS_NOT_LINKED_YET"
	ErrOnboardingRejected   Code = "BAD_REQUEST" // onboarding failure: code 0001, errorCode BAD_REQUEST
	ErrMemberNotFound       Code = partnerprofile.DefaultMemberNotFoundCode
	ErrInsufficientPoint    Code = "INSUFFICIENT_POINT"
	ErrDuplicateTransaction Code = partnerprofile.DefaultDuplicateCode
	ErrInvalidSign          Code = "INVALID_SIGN"
	ErrInvalidRequest       Code = "INVALID_REQUEST"
	ErrTransactionNotFound  Code = partnerprofile.DefaultNotFoundCode
)

// BusinessError is an answer in the API's error envelope (HTTP 400 for the
// spec's errors; any other 4xx but 401/403 that carries the envelope), or
// a success envelope whose data refuses the call (Data). The call was not
// applied. Never retried.
type BusinessError struct {
	Op  string // endpoint name, e.g. "point-accrual"
	Ref string // "tx=<transactionId>" or "member=<loyaltyId>", may be ""

	HTTPStatus    int
	StatusCode    int    // envelope statusCode
	StatusMessage string // envelope message, e.g. "Bad Request"
	Code          string // errors.code
	Message       string // errors.message (server text; not in Error())
	ErrorCode     string // errors.errorCode
	Name          string // errors.name (link/unlink)
	ResultURL     string // data.resultUrl (onboarding)
	// Data is the data of a success envelope that refuses the call
	// ("false" for unlink-member); "" for an error envelope.
	Data string
}

func (e *BusinessError) Error() string {
	var b strings.Builder
	b.WriteString(prefix(e.Op, e.Ref))
	fmt.Fprintf(&b, "business error (HTTP %d)", e.HTTPStatus)
	for _, s := range []string{e.Code, e.ErrorCode, e.Name} {
		if s != "" {
			b.WriteString(" " + s)
		}
	}
	if e.Data != "" {
		b.WriteString(": answered data: " + e.Data)
	}
	return b.String()
}

// Is matches a Code against errors.code, errors.errorCode and errors.name.
func (e *BusinessError) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c != "" && (string(c) == e.Code || string(c) == e.ErrorCode || string(c) == e.Name)
}

// APICode is the most specific code of the envelope: errors.code unless it
// is the generic onboarding "0001", then errorCode, then name.
func (e *BusinessError) APICode() string {
	if e.Code != "" && e.Code != "0001" {
		return e.Code
	}
	for _, s := range []string{e.ErrorCode, e.Name, e.Code} {
		if s != "" {
			return s
		}
	}
	return ""
}

// IsMemberLinked reports whether err is link-member's "already linked".
func IsMemberLinked(err error) bool {
	return errors.Is(err, ErrMemberIsLinked) || errors.Is(err, Code("MemberIsLinkedException"))
}

// IsMemberNotLinked reports whether err is unlink-member's "not linked yet".
func IsMemberNotLinked(err error) bool {
	return errors.Is(err, ErrMemberNotLinked) || errors.Is(err, Code("MemberIsNotLinkedException"))
}

// AuthError: the service or identity provider refused our credentials (a
// 401 that persisted after one token renewal, a 403, or a rejected grant).
// Not applied.
type AuthError struct {
	Op, Ref    string
	HTTPStatus int    // 0 when the token grant failed without an answer
	Code       string // envelope errors.code or OAuth2 error
	Err        error
}

func (e *AuthError) Error() string {
	s := prefix(e.Op, e.Ref) + "not authorised"
	if e.HTTPStatus != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.HTTPStatus)
	}
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *AuthError) Unwrap() error { return e.Err }

// TransientError: no definitive answer. Either the retry budget ran out on
// failures known not to have been applied (Ambiguous false), or a write
// failed in a way that may have been applied (Ambiguous true: timeout or
// broken connection after the request was sent, 5xx other than 503), which
// the client does not retry — see the package doc.
type TransientError struct {
	Op, Ref    string
	Status     int           // last HTTP status; 0 when no answer came
	RetryAfter time.Duration // last Retry-After asked for, if any
	Attempts   int
	Ambiguous  bool
	Err        error // cause: transport error, context error, grant error
}

func (e *TransientError) Error() string {
	var b strings.Builder
	b.WriteString(prefix(e.Op, e.Ref))
	if e.Ambiguous {
		b.WriteString("outcome unknown (may have been applied)")
	} else {
		b.WriteString("not applied")
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, ", HTTP %d", e.Status)
	}
	switch e.Attempts {
	case 0:
		b.WriteString(", before any request")
	case 1:
		b.WriteString(", after 1 attempt")
	default:
		fmt.Fprintf(&b, ", after %d attempts", e.Attempts)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *TransientError) Unwrap() error { return e.Err }

// MalformedResponseError: a 2xx answer we cannot read (not the spec's JSON
// envelope), a redirect, which is never followed, or an answer of any
// status whose body is over Options.MaxResponseBytes (ErrResponseTooLarge).
// Ambiguous when it answered a write with 2xx, or, over the limit, with a
// 5xx other than 503. An API failure. (A 4xx we cannot read is a
// *RejectedError.)
type MalformedResponseError struct {
	Op, Ref    string
	HTTPStatus int
	Ambiguous  bool
	Err        error
}

func (e *MalformedResponseError) Error() string {
	return fmt.Sprintf("%smalformed response (HTTP %d): %v", prefix(e.Op, e.Ref), e.HTTPStatus, e.Err)
}

func (e *MalformedResponseError) Unwrap() error { return e.Err }

// RejectedError: a 4xx answer without the API's error envelope (any 4xx
// but 401 and 403, which are auth, and 408 and 429, which are transient).
// It comes from something in front of the API — a gateway or proxy with no
// route (404), a method it does not allow (405), a body over its limit
// (413), a media type it refuses (415) — or from an API breaking its
// contract. The request was not applied, and the same request would be
// refused again: it is never retried, and it is not an API failure (the
// circuit does not hear it). Category INTERNAL, not retryable: replaying
// the original helps only after the route, limit or request is fixed.
type RejectedError struct {
	Op, Ref    string
	HTTPStatus int
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("%srejected with HTTP %d %s, without the API's error envelope (not applied)",
		prefix(e.Op, e.Ref), e.HTTPStatus, http.StatusText(e.HTTPStatus))
}

// ValidationError: the request was refused before any call.
type ValidationError struct {
	Op, Ref  string
	Problems []string
}

func (e *ValidationError) Error() string {
	return prefix(e.Op, e.Ref) + "invalid request: " + strings.Join(e.Problems, "; ")
}

func prefix(op, ref string) string {
	s := "loyalty: " + op
	if ref != "" {
		s += " " + ref
	}
	return s + ": "
}

// IsAPIFailure reports whether a call's error says the partner API is
// unwell: a transient failure (network, timeout, 408, 429, 5xx) or an
// unreadable answer to a request the API accepted (a 2xx or a 3xx).
// Business errors, refused credentials, 4xx answers without the envelope
// (*RejectedError), validation and context cancellation are answers or
// decisions, not failures of the API: a proxy refusing one body, or a
// misrouted endpoint, must not open the circuit for every record. It is
// the one classifier the circuit breaker, the bridge and the service use.
func IsAPIFailure(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var te *TransientError
	var me *MalformedResponseError
	return errors.As(err, &te) || errors.As(err, &me)
}

// IsCredentialRefused reports whether err says the partner refuses the
// bridge's credentials, not one record: the token grant was refused (or
// failed without a usable answer), or the API answered 401 to a token
// renewed for that call. Every record would fail the same way until the
// credentials are fixed, so the bridge holds records instead of reporting
// them (see internal/authhold). A 403 is not: the token was accepted and
// the API forbids this one resource or action, which waiting does not
// change; the spec names no way to tell a 403 of a disabled client from one
// of a resource, and the simulator never answers 403, so a 403 stays a
// record's AUTH error event.
func IsCredentialRefused(err error) bool {
	var ae *AuthError
	if !errors.As(err, &ae) {
		return false
	}
	return ae.Err != nil || ae.HTTPStatus == http.StatusUnauthorized
}

// IsAmbiguous reports whether err says the request may have been applied.
// The bridge then looks the transaction up before trying again.
func IsAmbiguous(err error) bool {
	var te *TransientError
	if errors.As(err, &te) {
		return te.Ambiguous
	}
	var me *MalformedResponseError
	return errors.As(err, &me) && me.Ambiguous
}

// ErrorCategory is the error-event category of a failure (LoyaltyError's
// category: docs/events.md).
type ErrorCategory string

// Categories the client's errors map to.
const (
	CategoryBusiness           ErrorCategory = "BUSINESS"
	CategoryAuth               ErrorCategory = "AUTH"
	CategoryTransientExhausted ErrorCategory = "TRANSIENT_EXHAUSTED"
	CategoryValidation         ErrorCategory = "VALIDATION"
	CategoryInternal           ErrorCategory = "INTERNAL"
)

// Category maps err to its error-event category; "" for nil.
func Category(err error) ErrorCategory {
	var (
		be *BusinessError
		ae *AuthError
		te *TransientError
		ve *ValidationError
		re *RejectedError
	)
	switch {
	case err == nil:
		return ""
	case IsUnrecognised(err):
		// Before BUSINESS, which it may wrap: the partner's answer is not
		// understood, so nothing is final; fixing the profile and
		// replaying may succeed.
		return CategoryTransientExhausted
	case errors.As(err, &be):
		return CategoryBusiness
	case errors.As(err, &re):
		// Not BUSINESS: the partner did not judge the request (no envelope,
		// no code), something in front of it refused it. Upstream reads
		// BUSINESS as the partner's final word on the transaction.
		return CategoryInternal
	case errors.As(err, &ae):
		return CategoryAuth
	case errors.As(err, &te), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return CategoryTransientExhausted
	case errors.As(err, &ve):
		return CategoryValidation
	}
	return CategoryInternal
}

// Retryable reports whether processing the same request later may succeed
// (the error event's retryable flag): transient and auth failures yes;
// business, validation, rejected and malformed answers no.
func Retryable(err error) bool {
	switch Category(err) {
	case CategoryTransientExhausted, CategoryAuth:
		return true
	}
	return false
}

// HTTPStatus is the HTTP status carried by err, 0 if none.
func HTTPStatus(err error) int {
	var (
		be *BusinessError
		ae *AuthError
		te *TransientError
		me *MalformedResponseError
		re *RejectedError
	)
	switch {
	case errors.As(err, &be):
		return be.HTTPStatus
	case errors.As(err, &re):
		return re.HTTPStatus
	case errors.As(err, &ae):
		return ae.HTTPStatus
	case errors.As(err, &te):
		return te.Status
	case errors.As(err, &me):
		return me.HTTPStatus
	}
	return 0
}
