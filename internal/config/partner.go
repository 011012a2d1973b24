package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// Partner is the partner profile: what the partner answers and requires
// where the spec is silent (error codes, transaction types and statuses,
// date encodings, absent or null unset documents, fractional points, the
// resultUrl parameters an error event keeps, the sign's and partner
// token's claims). Its
// defaults are the simulator's (partnerprofile.Default). `run`, `replay`, `dev`, `api` and `reconcile`
// compose it, and so does loyalty-sim, which answers as it says: one YAML
// file of these keys configures both.
type Partner struct {
	Profile partnerprofile.Profile

	accrualDate, redemptionDate, legacyDate *choice[partnerprofile.DateFormat]
	accrualType, redemptionType             *choice[partnerprofile.DateType]
	fractions                               *choice[partnerprofile.Fractions]
	lifetimeUnit                            *choice[partnerprofile.LifetimeUnit]
	keyed                                   *choice[partnerprofile.Keyed]
	txKey                                   *choice[partnerprofile.TransactionKey]
	signJTI, tokenJTI                       *choice[partnerprofile.JTI]
	signClaims                              *signClaimsFlag
	legacy                                  partnerprofile.DateFormat
}

// LegacyDateFormatFlag is the accrual date format's flag before the
// partner profile (LOYALTY_BRIDGE_API_TRANSACTION_DATE_FORMAT); it still
// works, and must agree with --partner-accrual-date-format when both are
// given.
const LegacyDateFormatFlag = "transaction-date-format"

// Define defines the section's --partner-* flags on b's flag set, with the
// profile's defaults, and binds each to envPrefix + its name:
// LOYALTY_BRIDGE_PARTNER_NOT_FOUND_CODES for EnvPrefix, in every bridge
// command alike (`api` included), LOYALTY_SIM_PARTNER_… for loyalty-sim.
func (p *Partner) Define(b *flagenv.Binder, envPrefix string) {
	fs := b.FlagSet()
	p.Profile = partnerprofile.Default()
	pr := &p.Profile
	fs.Var(listFlag{&pr.NotFoundCodes}, "partner-not-found-codes",
		"error codes (errors.code, errorCode or name) of a lookup that found no such transaction, comma-separated")
	fs.Var(listFlag{&pr.MemberNotFoundCodes}, "partner-member-not-found-codes",
		"error codes of a call naming a loyaltyId the partner does not know, comma-separated (a lookup refused with one found nothing)")
	fs.Var(listFlag{&pr.DuplicateCodes}, "partner-duplicate-codes",
		"error codes of a write refused because its transactionId was seen before, comma-separated")
	fs.Var(listFlag{&pr.SignRefusedCodes}, "partner-sign-refused-codes",
		"error codes of a redemption refused for its sign, comma-separated: a sign the bridge made refused so holds records (its --partner-jwt-*/--partner-sign-* settings or key are wrong) instead of writing error events")
	fs.Var(listFlag{&pr.WireRefusedCodes}, "partner-wire-refused-codes",
		"error codes (errors.code; an onboarding's resultUrl errorCode) of a call refused for a field the wire settings encode (transactionDate, an unset idNumber or passportNumber), comma-separated: "+
			"such a refusal naming the field in errors.message (\"transactionDate: …\") or resultUrl's "+partnerprofile.FieldParam+" parameter holds records (the --partner-*-date-* or --partner-unset-keyed-fields setting is not the partner's) instead of writing error events")
	fs.StringVar(&pr.AccrualType, "partner-accrual-type", pr.AccrualType, "transactionType of an accrual in lookup answers")
	fs.StringVar(&pr.RedemptionType, "partner-redemption-type", pr.RedemptionType, "transactionType of a redemption in lookup answers")
	p.txKey = defineChoice(fs, &pr.TransactionKey, "partner-transaction-key", pr.TransactionKey, partnerprofile.ParseTransactionKey,
		"what identifies a transaction at the partner: id-and-type (an accrual and a redemption may share a transactionId, as in the simulator; a lookup finding the other kind holds the record) "+
			"or id (one transaction per transactionId; a guarded write whose lookup finds the other kind is a BUSINESS error "+events.ReasonTransactionIDConflict+", never written)")
	fs.Var(listFlag{&pr.AppliedStatuses}, "partner-applied-statuses",
		"transaction statuses that mean applied, comma-separated")
	fs.Var(listFlag{&pr.FailedStatuses}, "partner-failed-statuses",
		"transaction statuses that mean recorded but not applied, comma-separated (default none; a status in neither list holds the record)")
	p.accrualDate = defineChoice(fs, &pr.AccrualDateFormat, "partner-accrual-date-format", pr.AccrualDateFormat,
		partnerprofile.ParseDateFormat, "accrual transactionDate on the wire: epoch-millis, epoch-seconds, iso8601 or layout:LAYOUT (a Go layout, written in UTC)")
	p.accrualType = defineChoice(fs, &pr.AccrualDateType, "partner-accrual-date-type", "",
		partnerprofile.ParseDateType, "JSON type of the accrual transactionDate: number (epoch formats only) or string (default number for an epoch format, as in the spec's example, else string)")
	p.redemptionDate = defineChoice(fs, &pr.RedemptionDateFormat, "partner-redemption-date-format", pr.RedemptionDateFormat,
		partnerprofile.ParseDateFormat, "redemption transactionDate (also signed): epoch-millis, epoch-seconds, iso8601 or layout:LAYOUT")
	p.redemptionType = defineChoice(fs, &pr.RedemptionDateType, "partner-redemption-date-type", pr.RedemptionDateType,
		partnerprofile.ParseDateType, "JSON type of the redemption transactionDate: string (the spec's type) or number (epoch formats only)")
	p.keyed = defineChoice(fs, &pr.UnsetKeyed, "partner-unset-keyed-fields", pr.UnsetKeyed, partnerprofile.ParseKeyed,
		"an onboarding's idNumber or passportNumber without a value (the spec: each \"required when the other is null\"): absent (key left out) or null")
	j := &pr.JWT
	fs.StringVar(&j.Algorithm, "partner-jwt-algorithm", "", "algorithm of the sign and partner token: RS256, PS256 or ES256 (default the --partner-key's: RS256 for RSA, ES256 for P-256)")
	fs.StringVar(&j.Issuer, "partner-jwt-issuer", "", "iss claim of the sign and partner token (default --client-id)")
	fs.StringVar(&j.Sign.Audience, "partner-sign-audience", j.Sign.Audience, "aud claim of the redemption sign (none: left out)")
	fs.StringVar(&j.Sign.Type, "partner-sign-type", j.Sign.Type, "typ claim of the redemption sign (none: left out; the header's typ stays JWT)")
	fs.DurationVar(&j.Sign.Lifetime, "partner-sign-lifetime", j.Sign.Lifetime, fmt.Sprintf("exp - iat of the redemption sign (at most %s)", partnerprofile.MaxJWTLifetime))
	p.signJTI = defineChoice(fs, &j.Sign.JTI, "partner-sign-jti", j.Sign.JTI, partnerprofile.ParseJTI,
		"jti of the redemption sign: random (new for every sign), transaction-id or none")
	p.signClaims = &signClaimsFlag{p: &j.SignClaims}
	fs.Var(p.signClaims, "partner-sign-claims", "redemption body fields the sign covers, comma-separated, each field[=claim][:string] "+
		"(claim: its name in the sign, default the field's; :string puts the value's text in a JSON string, default the value as in the body)")
	fs.StringVar(&j.PartnerToken.Audience, "partner-token-audience", j.PartnerToken.Audience, "aud claim of the partner token traded at exchange-token (none: left out)")
	fs.StringVar(&j.PartnerToken.Type, "partner-token-type", j.PartnerToken.Type, "typ claim of the partner token (none: left out)")
	fs.DurationVar(&j.PartnerToken.Lifetime, "partner-token-lifetime", j.PartnerToken.Lifetime, fmt.Sprintf("exp - iat of the partner token (at most %s)", partnerprofile.MaxJWTLifetime))
	p.tokenJTI = defineChoice(fs, &j.PartnerToken.JTI, "partner-token-jti", j.PartnerToken.JTI, partnerprofile.ParseJTI,
		"jti of the partner token: random or none")
	p.fractions = defineChoice(fs, &pr.FractionalPoints, "partner-fractional-points", pr.FractionalPoints,
		partnerprofile.ParseFractions, "a fractional transactionPoint or usedPoint in an answer: refuse (a malformed answer) or round-half-up")
	p.lifetimeUnit = defineChoice(fs, &pr.TokenLifetimeUnit, "partner-token-lifetime-unit", pr.TokenLifetimeUnit,
		partnerprofile.ParseLifetimeUnit, "unit of expires_in and refresh_expires_in in the token endpoints' answers (the spec does not say): seconds (Keycloak's, the simulator's) or milliseconds")
	fs.DurationVar(&pr.ApplyWindow, "partner-apply-window", pr.ApplyWindow,
		"a write the partner received is applied within this long of its sending, or never (the spec does not say; set the partner's own bound): "+
			"after an ambiguous write (timeout, 5xx, lost connection) the guard's lookup waits until the window has passed, and a takeover waits --api-timeout plus it")
	fs.Var(listFlag{&pr.ResultURLParams}, "partner-result-url-params",
		"query parameters of an error answer's resultUrl kept in error events, comma-separated (default none: the query string is dropped; onboarding error events carry no resultUrl)")
	for _, name := range PartnerFlags {
		b.Env(name, flagenv.VarName(envPrefix, name))
	}
}

// PartnerFlags are the section's flags, which are also the keys of a
// profile file (loyalty-sim --profile, or the bridge's --config).
var PartnerFlags = []string{"partner-not-found-codes", "partner-member-not-found-codes", "partner-duplicate-codes", "partner-sign-refused-codes", "partner-wire-refused-codes", "partner-accrual-type", "partner-redemption-type",
	"partner-transaction-key", "partner-applied-statuses", "partner-failed-statuses", "partner-accrual-date-format", "partner-accrual-date-type",
	"partner-redemption-date-format", "partner-redemption-date-type", "partner-unset-keyed-fields",
	"partner-fractional-points", "partner-token-lifetime-unit", "partner-result-url-params", "partner-apply-window",
	"partner-jwt-algorithm", "partner-jwt-issuer", "partner-sign-audience", "partner-sign-type", "partner-sign-lifetime", "partner-sign-jti",
	"partner-sign-claims", "partner-token-audience", "partner-token-type", "partner-token-lifetime", "partner-token-jti"}

// DefineLegacy defines --transaction-date-format, the accrual date
// format's flag before the profile, bound to
// LOYALTY_BRIDGE_API_TRANSACTION_DATE_FORMAT as it was.
func (p *Partner) DefineLegacy(b *flagenv.Binder) {
	p.legacyDate = defineChoice(b.FlagSet(), &p.legacy, LegacyDateFormatFlag, "", partnerprofile.ParseDateFormat,
		"deprecated: --partner-accrual-date-format")
	b.Env(LegacyDateFormatFlag, flagenv.VarName(APIEnvPrefix, LegacyDateFormatFlag))
}

// Validate reports every problem of the section together, and takes the
// legacy --transaction-date-format when it alone is given.
func (p *Partner) Validate() error {
	var errs []error
	for name, c := range map[string]*choice[partnerprofile.DateFormat]{"partner-accrual-date-format": p.accrualDate,
		"partner-redemption-date-format": p.redemptionDate, LegacyDateFormatFlag: p.legacyDate} {
		errs = append(errs, c.check(name))
	}
	errs = append(errs, p.fractions.check("partner-fractional-points"), p.lifetimeUnit.check("partner-token-lifetime-unit"),
		p.keyed.check("partner-unset-keyed-fields"),
		p.txKey.check("partner-transaction-key"),
		p.accrualType.check("partner-accrual-date-type"), p.redemptionType.check("partner-redemption-date-type"),
		p.signJTI.check("partner-sign-jti"), p.tokenJTI.check("partner-token-jti"))
	if p.Profile.ApplyWindow <= 0 {
		errs = append(errs, fmt.Errorf("--partner-apply-window %v: must be more than 0", p.Profile.ApplyWindow))
	}
	if p.signClaims != nil && p.signClaims.err != nil {
		errs = append(errs, fmt.Errorf("--partner-sign-claims: %w", p.signClaims.err))
	}
	if p.legacyDate.given() && p.legacy != "" {
		switch {
		case !p.accrualDate.given():
			p.Profile.AccrualDateFormat = p.legacy
		case p.legacy != p.Profile.AccrualDateFormat:
			errs = append(errs, fmt.Errorf("--%s %s and --partner-accrual-date-format %s differ; give only the latter",
				LegacyDateFormatFlag, p.legacy, p.Profile.AccrualDateFormat))
		}
	}
	if err := p.Profile.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--partner-*: %w", err))
	}
	return errors.Join(errs...)
}

// Build returns the profile, every default filled.
func (p *Partner) Build() partnerprofile.Profile { return p.Profile.WithDefaults() }

// listFlag is a comma-separated list; a value replaces the list, empty
// entries are dropped.
type listFlag struct{ p *[]string }

func (l listFlag) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l listFlag) Set(s string) error {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	*l.p = out
	return nil
}

// signClaimsFlag is --partner-sign-claims: a comma-separated list of
// field[=claim][:string]. A bad entry is kept for Validate.
type signClaimsFlag struct {
	p   *[]partnerprofile.SignClaim
	err error
}

func (f *signClaimsFlag) String() string {
	if f == nil || f.p == nil {
		return ""
	}
	out := make([]string, len(*f.p))
	for i, c := range *f.p {
		out[i] = c.String()
	}
	return strings.Join(out, ",")
}

func (f *signClaimsFlag) Set(s string) error {
	var out []partnerprofile.SignClaim
	f.err = nil
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		c, err := partnerprofile.ParseSignClaim(v)
		if err != nil {
			f.err = err
			return nil
		}
		out = append(out, c)
	}
	*f.p = out
	return nil
}
