package partnerprofile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Defaults: the simulator's choices where the spec is silent. Both the
// simulator and the bridge read them from here.
const (
	DefaultNotFoundCode         = "TRANSACTION_NOT_FOUND"
	DefaultMemberNotFoundCode   = "MEMBER_NOT_FOUND"
	DefaultDuplicateCode        = "DUPLICATE_TRANSACTION"
	DefaultAccrualType          = "ACCRUAL"
	DefaultRedemptionType       = "REDEMPTION"
	DefaultAppliedStatus        = "SUCCESS"
	DefaultAccrualDateFormat    = DateEpochMillis
	DefaultRedemptionDateFormat = DateISO8601
	DefaultFractionalPoints     = FractionsRefuse
	DefaultRedemptionDateType   = DateString
	DefaultUnsetKeyed           = KeyedAbsent
	DefaultTransactionKey       = KeyIDAndType
	DefaultSignRefusedCode      = "INVALID_SIGN"
	// DefaultApplyWindow is ApplyWindow's default. The spec says nothing
	// of when a write is applied, so this is an assumption, to be replaced
	// by the partner's own bound: several times the 300 ms after which
	// our simulator applies a late write (sim.DefaultLateApplyDelay), and
	// room for a partner's queue behind a gateway that answered 504. It is
	// also what each ambiguous write costs its record (the wait before its
	// guarded retry, holding no slot) and what an unclean takeover and
	// the lease add to --api-timeout, so it is kept short: a partner whose
	// gateway may hold a request longer (a 30 s gateway timeout before a
	// backend that keeps going) needs its own bound here, and no default
	// can know it.
	DefaultApplyWindow = 2 * time.Second
	// DefaultInvalidRequestCode and DefaultMissingFieldCode are the
	// default wire-refused codes: the simulator's errors.code of a point
	// call refused for a field, and its onboarding resultUrl errorCode of
	// a field it requires keyed (a field of the wrong form is
	// DefaultInvalidRequestCode there too).
	DefaultInvalidRequestCode = "INVALID_REQUEST"
	DefaultMissingFieldCode   = "MISSING_FIELD"
	// FieldParam is the query parameter of an onboarding error's resultUrl
	// that names the refused field, as the simulator does. The spec gives
	// resultUrl only an errorCode parameter; a partner that names no
	// field there has no onboarding refusal the bridge can take for its
	// settings' (a point call names its field in errors.message instead,
	// as "<field>: <why>").
	FieldParam = "field"
)

// Fractions says what a fractional point value (transactionPoint,
// usedPoint) in an answer means. The spec types points as "number" without
// saying whether they are whole.
type Fractions string

// Fraction treatments.
const (
	// FractionsRefuse: a fractional point value is a malformed answer (for
	// a write's answer, an ambiguous one). The default: the bridge does
	// not guess what 12.5 points are.
	FractionsRefuse Fractions = "refuse"
	// FractionsRoundHalfUp: rounded to the nearest whole point, halves away
	// from zero (12.5 → 13, 12.4 → 12), computed exactly on the decimal
	// text.
	FractionsRoundHalfUp Fractions = "round-half-up"
)

// ParseFractions accepts "refuse" and "round-half-up" ("" gives "").
func ParseFractions(s string) (Fractions, error) {
	switch f := Fractions(s); f {
	case "", FractionsRefuse, FractionsRoundHalfUp:
		return f, nil
	}
	return "", fmt.Errorf("fractional points %q: want refuse or round-half-up", s)
}

// LifetimeUnit is the unit of a token answer's expires_in and
// refresh_expires_in. The spec types both as "number" and says "Unit and
// meaning of expires_in and refresh_expires_in: not shown"; Keycloak, whose
// token endpoint the spec's resembles, answers seconds.
type LifetimeUnit string

// Lifetime units.
const (
	LifetimeSeconds      LifetimeUnit = "seconds"
	LifetimeMilliseconds LifetimeUnit = "milliseconds"
)

// DefaultLifetimeUnit is the simulator's (and Keycloak's).
const DefaultLifetimeUnit = LifetimeSeconds

// ParseLifetimeUnit accepts "seconds" and "milliseconds" ("" gives "").
func ParseLifetimeUnit(s string) (LifetimeUnit, error) {
	switch u := LifetimeUnit(s); u {
	case "", LifetimeSeconds, LifetimeMilliseconds:
		return u, nil
	}
	return "", fmt.Errorf("token lifetime unit %q: want seconds or milliseconds", s)
}

// Duration is one unit of u; one second for "" (the default).
func (u LifetimeUnit) Duration() time.Duration {
	if u == LifetimeMilliseconds {
		return time.Millisecond
	}
	return time.Second
}

// TransactionKey says what identifies a point transaction at the
// partner: the transactionId alone, or the transactionId and the kind.
// The spec gives accrual and redemption separate endpoints, each taking a
// "unique key of the partner transaction", and a lookup by transactionId
// that answers one record carrying its transactionType; it does not say
// whether one id may name an accrual and a redemption at once (an order
// paid partly with points).
type TransactionKey string

// Transaction keys.
const (
	// KeyIDAndType: an accrual and a redemption are separate transactions
	// even under one transactionId, and a lookup by the id shows one of
	// them. Finding the other kind then says nothing about the kind asked,
	// which may exist beside it unseen: the answer is not understood, and
	// the bridge holds the record. The default: it is what the simulator
	// does, and it is the reading that concludes nothing from the other
	// kind, so a wrong guess of the partner's keying costs a hold, never
	// an effect.
	KeyIDAndType TransactionKey = "id-and-type"
	// KeyID: one transaction per transactionId, whatever its kind. Finding
	// the other kind says the kind asked was not applied and cannot be
	// under that id: a write would collide with the other kind's.
	KeyID TransactionKey = "id"
)

// ParseTransactionKey accepts id and id-and-type ("" gives "").
func ParseTransactionKey(s string) (TransactionKey, error) {
	switch k := TransactionKey(s); k {
	case "", KeyIDAndType, KeyID:
		return k, nil
	}
	return "", fmt.Errorf("transaction key %q: want id or id-and-type", s)
}

// Kind is the kind of a point transaction.
type Kind int

// Kinds.
const (
	Accrual Kind = iota + 1
	Redemption
)

func (k Kind) String() string {
	switch k {
	case Accrual:
		return "accrual"
	case Redemption:
		return "redemption"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Profile is what a partner answers where the spec is silent. The zero
// value is Default: every empty field takes its default (WithDefaults).
type Profile struct {
	// NotFoundCodes are the error codes (errors.code, errorCode or name)
	// of a lookup that found no such transaction.
	NotFoundCodes []string
	// MemberNotFoundCodes are the error codes of a call naming a loyaltyId
	// the partner does not know. A lookup refused with one found nothing:
	// nothing was applied to a member that does not exist.
	MemberNotFoundCodes []string
	// DuplicateCodes are the error codes of a write refused because its
	// transactionId was applied already.
	DuplicateCodes []string
	// AccrualType and RedemptionType are the transactionType values of a
	// lookup answer.
	AccrualType, RedemptionType string
	// TransactionKey is what identifies a transaction at the partner: what
	// a lookup that finds the other kind under a transactionId means.
	TransactionKey TransactionKey
	// AppliedStatuses are the statuses of a transaction that took effect.
	AppliedStatuses []string
	// FailedStatuses are the statuses of a transaction recorded but not
	// applied (default none). A status in neither list is not understood:
	// the bridge holds the record rather than guess.
	FailedStatuses []string
	// AccrualDateFormat and RedemptionDateFormat are the transactionDate
	// formats the bridge sends, and AccrualDateType and
	// RedemptionDateType their JSON types (see DateType for the
	// defaults).
	AccrualDateFormat, RedemptionDateFormat DateFormat
	AccrualDateType, RedemptionDateType     DateType
	// UnsetKeyed is how an onboarding's idNumber or passportNumber goes
	// when the member has none: the spec marks both required, each
	// "required when the other is null".
	UnsetKeyed Keyed
	// JWT is what the partner requires of the JWTs the bridge signs: the
	// redemption sign and the partner token.
	JWT JWT
	// SignRefusedCodes are the error codes of a redemption refused for its
	// sign. A sign the bridge made refused so says its JWT settings or key
	// do not match the partner's: the bridge holds records, as for refused
	// credentials, rather than write error events.
	SignRefusedCodes []string
	// WireRefusedCodes are the error codes (errors.code of a point call,
	// the resultUrl errorCode of an onboarding) of a call refused for a
	// field whose encoding the wire settings above choose: transactionDate
	// (the date format and type) and an unset idNumber or passportNumber
	// (UnsetKeyed). Such a refusal naming such a field says the settings
	// are not the partner's: the bridge holds records rather than write
	// error events (internal/bridge, wirerefusal.go).
	WireRefusedCodes []string
	// FractionalPoints is what a fractional point value in an answer means.
	FractionalPoints Fractions
	// TokenLifetimeUnit is the unit of the token endpoints' expires_in and
	// refresh_expires_in (token and exchange-token alike).
	TokenLifetimeUnit LifetimeUnit
	// ApplyWindow bounds when the partner applies a write it received: a
	// write is applied within ApplyWindow of when it was sent, or never.
	// After an ambiguous write (a timeout, a 5xx, a lost connection) a
	// lookup that finds nothing means "not applied" only once the window
	// has passed; the takeover wait and the lease add it to the call
	// timeout. Zero: DefaultApplyWindow.
	ApplyWindow time.Duration
	// ResultURLParams are the query parameters of data.resultUrl that an
	// error event keeps (the spec's errorCode, say). Default none: the
	// partner's URL is untrusted text, and a query string is where an
	// echoed access_token or a member's data would sit. Onboarding error
	// events carry no resultUrl at all (internal/bridge).
	ResultURLParams []string
}

// Default is the simulator's profile.
func Default() Profile {
	return Profile{}.WithDefaults()
}

// WithDefaults fills every empty field with its default. Lists are copied,
// so the result shares nothing with p.
func (p Profile) WithDefaults() Profile {
	list := func(l []string, def string) []string {
		if len(l) == 0 {
			return []string{def}
		}
		return slices.Clone(l)
	}
	str := func(s *string, def string) {
		if *s == "" {
			*s = def
		}
	}
	p.NotFoundCodes = list(p.NotFoundCodes, DefaultNotFoundCode)
	p.MemberNotFoundCodes = list(p.MemberNotFoundCodes, DefaultMemberNotFoundCode)
	p.DuplicateCodes = list(p.DuplicateCodes, DefaultDuplicateCode)
	p.SignRefusedCodes = list(p.SignRefusedCodes, DefaultSignRefusedCode)
	p.WireRefusedCodes = slices.Clone(p.WireRefusedCodes)
	if len(p.WireRefusedCodes) == 0 {
		p.WireRefusedCodes = DefaultWireRefusedCodes()
	}
	p.AppliedStatuses = list(p.AppliedStatuses, DefaultAppliedStatus)
	p.FailedStatuses = slices.Clone(p.FailedStatuses)
	p.ResultURLParams = slices.Clone(p.ResultURLParams)
	str(&p.AccrualType, DefaultAccrualType)
	str(&p.RedemptionType, DefaultRedemptionType)
	if p.AccrualDateFormat == "" {
		p.AccrualDateFormat = DefaultAccrualDateFormat
	}
	if p.RedemptionDateFormat == "" {
		p.RedemptionDateFormat = DefaultRedemptionDateFormat
	}
	if p.FractionalPoints == "" {
		p.FractionalPoints = DefaultFractionalPoints
	}
	if p.TokenLifetimeUnit == "" {
		p.TokenLifetimeUnit = DefaultLifetimeUnit
	}
	// AccrualDateType stays empty when not given: its default follows the
	// format (AccrualDate), which a caller may still change.
	p.RedemptionDateType = p.RedemptionDateEncoding().Type
	p.UnsetKeyed = p.Keyed()
	p.ApplyWindow = p.Window()
	p.TransactionKey = p.Key()
	p.JWT = p.JWT.WithDefaults()
	return p
}

// Window is ApplyWindow, or DefaultApplyWindow when it is zero.
func (p Profile) Window() time.Duration {
	if p.ApplyWindow == 0 {
		return DefaultApplyWindow
	}
	return p.ApplyWindow
}

// Validate reports every contradiction of p (after WithDefaults) together:
// a code that means both not found and duplicate, one type for both kinds,
// a status both applied and failed, an empty entry, an unknown format.
func (p Profile) Validate() error {
	p = p.WithDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for name, l := range map[string][]string{"not-found codes": p.NotFoundCodes, "member-not-found codes": p.MemberNotFoundCodes,
		"duplicate codes": p.DuplicateCodes, "sign-refused codes": p.SignRefusedCodes, "wire-refused codes": p.WireRefusedCodes,
		"applied statuses": p.AppliedStatuses, "failed statuses": p.FailedStatuses, "result URL parameters": p.ResultURLParams} {
		if slices.ContainsFunc(l, func(s string) bool { return strings.TrimSpace(s) == "" }) {
			bad("%s: an empty entry", name)
		}
	}
	for _, c := range p.NotFoundCodes {
		if slices.Contains(p.DuplicateCodes, c) {
			bad("code %q is both a not-found and a duplicate code", c)
		}
	}
	for _, c := range p.MemberNotFoundCodes {
		if slices.Contains(p.DuplicateCodes, c) {
			bad("code %q is both a member-not-found and a duplicate code", c)
		}
	}
	for _, s := range p.AppliedStatuses {
		if slices.Contains(p.FailedStatuses, s) {
			bad("status %q is both applied and failed", s)
		}
	}
	if p.AccrualType == p.RedemptionType {
		bad("accrual and redemption have the same transactionType %q", p.AccrualType)
	}
	for kind, d := range map[string]DateEncoding{"accrual": p.AccrualDate(), "redemption": p.RedemptionDateEncoding()} {
		if err := d.validate(); err != nil {
			bad("%s %v", kind, err)
		}
	}
	if _, err := ParseKeyed(string(p.UnsetKeyed)); err != nil {
		errs = append(errs, err)
	}
	if _, err := ParseTransactionKey(string(p.TransactionKey)); err != nil {
		errs = append(errs, err)
	}
	if _, err := ParseLifetimeUnit(string(p.TokenLifetimeUnit)); err != nil {
		errs = append(errs, err)
	}
	if err := p.JWT.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := ParseFractions(string(p.FractionalPoints)); err != nil {
		errs = append(errs, err)
	}
	if p.ApplyWindow < 0 {
		bad("apply window %v: must be positive", p.ApplyWindow)
	}
	return errors.Join(errs...)
}

// in reports whether s is in l, or is def when l is empty (the zero
// Profile reads as Default without copying it on every call).
func in(l []string, def, s string) bool {
	if len(l) == 0 {
		return s == def
	}
	return slices.Contains(l, s)
}

func or[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}

// TypeOf is the transactionType of kind k ("" for an unknown kind).
func (p Profile) TypeOf(k Kind) string {
	switch k {
	case Accrual:
		return or(p.AccrualType, DefaultAccrualType)
	case Redemption:
		return or(p.RedemptionType, DefaultRedemptionType)
	}
	return ""
}

// KindOf is the kind whose transactionType is t, or 0 when the profile
// does not know t.
func (p Profile) KindOf(t string) Kind {
	switch t {
	case p.TypeOf(Accrual):
		return Accrual
	case p.TypeOf(Redemption):
		return Redemption
	}
	return 0
}

// Status is what a transaction status means.
type Status int

// Statuses.
const (
	StatusUnknown Status = iota
	StatusApplied
	StatusFailed
)

// StatusOf reads a transaction status.
func (p Profile) StatusOf(s string) Status {
	switch {
	case in(p.AppliedStatuses, DefaultAppliedStatus, s):
		return StatusApplied
	case slices.Contains(p.FailedStatuses, s):
		return StatusFailed
	}
	return StatusUnknown
}

// IsNotFound reports whether code is one of the not-found codes.
func (p Profile) IsNotFound(code string) bool {
	return code != "" && in(p.NotFoundCodes, DefaultNotFoundCode, code)
}

// IsMemberNotFound reports whether code is one of the member-not-found
// codes.
func (p Profile) IsMemberNotFound(code string) bool {
	return code != "" && in(p.MemberNotFoundCodes, DefaultMemberNotFoundCode, code)
}

// IsSignRefused reports whether code is one of the sign-refused codes.
func (p Profile) IsSignRefused(code string) bool {
	return code != "" && in(p.SignRefusedCodes, DefaultSignRefusedCode, code)
}

// DefaultWireRefusedCodes are the wire-refused codes of a profile that
// names none: the simulator's.
func DefaultWireRefusedCodes() []string {
	return []string{DefaultInvalidRequestCode, DefaultMissingFieldCode}
}

// IsWireRefused reports whether code is one of the wire-refused codes.
func (p Profile) IsWireRefused(code string) bool {
	if code == "" {
		return false
	}
	if len(p.WireRefusedCodes) == 0 {
		return slices.Contains(DefaultWireRefusedCodes(), code)
	}
	return slices.Contains(p.WireRefusedCodes, code)
}

// IsDuplicate reports whether code is one of the duplicate codes.
func (p Profile) IsDuplicate(code string) bool {
	return code != "" && in(p.DuplicateCodes, DefaultDuplicateCode, code)
}

// RedemptionDate is t as the text of a redemption transactionDate (its
// digits when it travels as a number).
func (p Profile) RedemptionDate(t time.Time) string {
	return p.RedemptionDateEncoding().Format.Format(t)
}

// AccrualFormat is the accrual transactionDate format.
func (p Profile) AccrualFormat() DateFormat { return or(p.AccrualDateFormat, DefaultAccrualDateFormat) }

// AccrualDate is how an accrual transactionDate travels.
func (p Profile) AccrualDate() DateEncoding {
	f := p.AccrualFormat()
	return DateEncoding{Format: f, Type: or(p.AccrualDateType, f.naturalType())}
}

// RedemptionDateEncoding is how a redemption transactionDate travels.
func (p Profile) RedemptionDateEncoding() DateEncoding {
	return DateEncoding{Format: or(p.RedemptionDateFormat, DefaultRedemptionDateFormat),
		Type: or(p.RedemptionDateType, DefaultRedemptionDateType)}
}

// Keyed is how an unset idNumber or passportNumber goes.
func (p Profile) Keyed() Keyed { return or(p.UnsetKeyed, DefaultUnsetKeyed) }

// Key is what identifies a transaction at the partner.
func (p Profile) Key() TransactionKey { return or(p.TransactionKey, DefaultTransactionKey) }

// Fractions is what a fractional point value means.
func (p Profile) Fractions() Fractions { return or(p.FractionalPoints, DefaultFractionalPoints) }
