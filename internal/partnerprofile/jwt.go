package partnerprofile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The spec says of the two JWTs a partner signs only that the redemption
// `sign` is "a signed data token (a JWT)" ("How sign is computed and what
// it covers: not shown") and that the partner token is "a JWT signed with
// the partner's private key" ("Claims required in the partner token: not
// shown"). JWT names every choice a partner will state in its own
// documentation; its defaults are the claims the bridge has always sent,
// which the simulator requires by default.

// Defaults of JWT.
const (
	// DefaultSignAudience and DefaultPartnerTokenAudience name the
	// endpoint each JWT is for, by the spec's path; with the types, they
	// keep one kind of JWT from being accepted as the other.
	DefaultSignAudience         = "/api-point/partner/v1/point-redemption-with-token"
	DefaultSignType             = "redemption-sign"
	DefaultPartnerTokenAudience = "/api-identity/public/v1/exchange-token"
	DefaultPartnerTokenType     = "partner-token"
	DefaultSignLifetime         = 2 * time.Minute
	DefaultPartnerTokenLifetime = 2 * time.Minute
	// MaxJWTLifetime bounds both lifetimes: a sign or partner token is made
	// for one request sent at once, and a leaked one must not be good for
	// long.
	MaxJWTLifetime = 5 * time.Minute
	DefaultJTI     = JTIRandom
)

// None, as an audience or a type, leaves the claim out.
const None = "none"

// Algorithms a JWT may be signed with. "" (the default) is the key's own:
// RS256 for an RSA key, ES256 for a P-256 one.
const (
	AlgRS256 = "RS256"
	AlgPS256 = "PS256"
	AlgES256 = "ES256"
)

// JTI is how a JWT's jti is chosen.
type JTI string

// JTI choices.
const (
	// JTIRandom: 128 random bits, new for every JWT (the default).
	JTIRandom JTI = "random"
	// JTITransactionID: the redemption's transactionId (a sign only): a
	// partner that keys its replay check by transaction.
	JTITransactionID JTI = "transaction-id"
	// JTINone: no jti claim.
	JTINone JTI = "none"
)

// ParseJTI accepts random, transaction-id and none ("" gives "").
func ParseJTI(s string) (JTI, error) {
	switch j := JTI(s); j {
	case "", JTIRandom, JTITransactionID, JTINone:
		return j, nil
	}
	return "", fmt.Errorf("jti %q: want random, transaction-id or none", s)
}

// Claims are the registered claims of one kind of JWT.
type Claims struct {
	// Audience is the aud claim (None: left out).
	Audience string
	// Type is the typ claim, a claim as Keycloak types its own tokens;
	// the header's typ stays JWT (None: no typ claim).
	Type string
	// Lifetime is exp − iat (at most MaxJWTLifetime).
	Lifetime time.Duration
	// JTI is how the jti claim is chosen.
	JTI JTI
}

// ClaimEncoding says how a body field's value is put in a sign claim.
type ClaimEncoding string

// Claim encodings.
const (
	// ClaimAsBody: the JSON value as it travels in the body (the default).
	ClaimAsBody ClaimEncoding = "body"
	// ClaimAsString: the body value's text as a JSON string ("40" for
	// usedPoint 40).
	ClaimAsString ClaimEncoding = "string"
)

// SignClaim is one body field of a redemption covered by its sign.
type SignClaim struct {
	// Field is the body field: one of SignableFields.
	Field string
	// Claim is the claim's name (default Field).
	Claim string
	// Encoding is how the value goes in the claim (default ClaimAsBody).
	Encoding ClaimEncoding
}

// String is the setting's text: field[=claim][:string].
func (c SignClaim) String() string {
	s := c.Field
	if c.Claim != "" && c.Claim != c.Field {
		s += "=" + c.Claim
	}
	if c.Encoding == ClaimAsString {
		s += ":" + string(ClaimAsString)
	}
	return s
}

// SignableFields are the redemption body fields a sign may cover (all
// but sign itself).
func SignableFields() []string {
	return []string{"loyaltyId", "transactionId", "usedPoint", "transactionAmount", "transactionDate", "transactionDes"}
}

// DefaultSignClaims are the body fields the sign has always covered, each
// under its own name and as it travels.
func DefaultSignClaims() []SignClaim {
	return []SignClaim{{Field: "loyaltyId"}, {Field: "transactionId"}, {Field: "usedPoint"}, {Field: "transactionAmount"}, {Field: "transactionDate"}}
}

// ParseSignClaim reads field[=claim][:string].
func ParseSignClaim(s string) (SignClaim, error) {
	var c SignClaim
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, ":"); i >= 0 {
		switch e := ClaimEncoding(s[i+1:]); e {
		case ClaimAsBody, ClaimAsString:
			c.Encoding, s = e, s[:i]
		default:
			return c, fmt.Errorf("sign claim %q: encoding %q: want body or string", s, e)
		}
	}
	c.Field, c.Claim, _ = strings.Cut(s, "=")
	return c, nil
}

// registeredClaims are the claims the JWT's own settings fill, which no
// body field may take.
func registeredClaims() []string {
	return []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti", "typ"}
}

// JWT is what the partner requires of the two JWTs the bridge signs.
type JWT struct {
	// Algorithm is RS256, PS256 or ES256 ("": the key's own, RS256 for
	// RSA, ES256 for P-256).
	Algorithm string
	// Issuer is the iss claim ("": the partner's client_id).
	Issuer string
	// Sign and PartnerToken are the registered claims of each kind.
	Sign, PartnerToken Claims
	// SignClaims are the body fields the sign covers.
	SignClaims []SignClaim
}

// WithDefaults fills every empty field with its default.
func (j JWT) WithDefaults() JWT {
	fill := func(c *Claims, aud, typ string, life time.Duration) {
		c.Audience, c.Type = or(c.Audience, aud), or(c.Type, typ)
		if c.Lifetime == 0 {
			c.Lifetime = life
		}
		c.JTI = or(c.JTI, DefaultJTI)
	}
	fill(&j.Sign, DefaultSignAudience, DefaultSignType, DefaultSignLifetime)
	fill(&j.PartnerToken, DefaultPartnerTokenAudience, DefaultPartnerTokenType, DefaultPartnerTokenLifetime)
	if len(j.SignClaims) == 0 {
		j.SignClaims = DefaultSignClaims()
	} else {
		j.SignClaims = slices.Clone(j.SignClaims)
	}
	for i := range j.SignClaims {
		c := &j.SignClaims[i]
		c.Claim, c.Encoding = or(c.Claim, c.Field), or(c.Encoding, ClaimAsBody)
	}
	return j
}

// Validate reports every problem of j (after WithDefaults) together.
func (j JWT) Validate() error {
	j = j.WithDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch j.Algorithm {
	case "", AlgRS256, AlgPS256, AlgES256:
	default:
		bad("JWT algorithm %q: want RS256, PS256 or ES256 (or none given: the key's)", j.Algorithm)
	}
	for kind, c := range map[string]Claims{"sign": j.Sign, "partner token": j.PartnerToken} {
		if c.Lifetime <= 0 || c.Lifetime > MaxJWTLifetime {
			bad("%s lifetime %s: want more than 0 and at most %s", kind, c.Lifetime, MaxJWTLifetime)
		}
		if _, err := ParseJTI(string(c.JTI)); err != nil {
			bad("%s %v", kind, err)
		}
	}
	if j.PartnerToken.JTI == JTITransactionID {
		bad("partner token jti transaction-id: a partner token has no transaction (want random or none)")
	}
	claims := map[string]bool{}
	for _, c := range j.SignClaims {
		switch {
		case !slices.Contains(SignableFields(), c.Field):
			bad("sign claim of field %q: want one of %v", c.Field, SignableFields())
		case c.Claim == "" || slices.Contains(registeredClaims(), c.Claim):
			bad("sign claim %q of field %s: a name of its own is needed (not a registered claim: %v)", c.Claim, c.Field, registeredClaims())
		case claims[c.Claim]:
			bad("sign claim %q named twice", c.Claim)
		}
		claims[c.Claim] = true
		if c.Encoding != ClaimAsBody && c.Encoding != ClaimAsString {
			bad("sign claim %s: encoding %q: want body or string", c.Claim, c.Encoding)
		}
	}
	return errors.Join(errs...)
}

// IssuerFor is the iss claim for clientID.
func (j JWT) IssuerFor(clientID string) string { return or(j.Issuer, clientID) }
