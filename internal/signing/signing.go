package signing

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/secretfile"
)

// MaxPartnerTokenTTL is the longest lifetime the partner API accepts for a
// partner token (its exp may be at most five minutes ahead).
const MaxPartnerTokenTTL = partnerprofile.MaxJWTLifetime

// MaxSignTTL is the longest lifetime (exp − iat) given to a redemption
// sign. A sign is made for one request sent at once; the simulator refuses
// longer-lived ones by default (sim.DefaultMaxSignLifetime reads this).
const MaxSignTTL = partnerprofile.MaxJWTLifetime

// The default `aud` and `typ` claims that tell the two JWTs apart, so that
// neither is accepted where the other is expected (the partner profile's
// JWT section may name others). aud names the endpoint the JWT is for, by
// the spec's path (independent of {base_url}); typ is a claim, as Keycloak
// types its own tokens, while the header's `typ` stays "JWT" (some
// verifiers accept no other value there).
const (
	RedemptionSignAudience = partnerprofile.DefaultSignAudience
	RedemptionSignType     = partnerprofile.DefaultSignType
	PartnerTokenAudience   = partnerprofile.DefaultPartnerTokenAudience
	PartnerTokenType       = partnerprofile.DefaultPartnerTokenType
)

// Defaults of Options.
const (
	DefaultSignTTL         = partnerprofile.DefaultSignLifetime
	DefaultPartnerTokenTTL = partnerprofile.DefaultPartnerTokenLifetime
)

// Options configures a Signer. Issuer is required; the rest have defaults.
type Options struct {
	// Issuer is the partner's client_id, sent as `iss`.
	Issuer string
	// KID, when set, is put in the JWT header as `kid` so the service can
	// pick the registered public key.
	KID string
	// SignTTL is the lifetime of a redemption sign (default the
	// Profile's, 2 minutes unless it says otherwise; at most MaxSignTTL).
	SignTTL time.Duration
	// PartnerTokenTTL is the lifetime of a partner token (default the
	// Profile's, 2 minutes unless it says otherwise; at most
	// MaxPartnerTokenTTL).
	PartnerTokenTTL time.Duration
	// Profile is the partner profile: its JWT section says the algorithm,
	// iss, aud, typ, jti and which redemption body fields the sign covers,
	// and its redemption date encoding how transactionDate travels (a
	// claim "as in the body" follows it). Zero value: the claims the
	// package has always made.
	Profile partnerprofile.Profile
	// Now is the clock (default time.Now); tests and simulators with a
	// fake clock set it.
	Now func() time.Time
	// OnReload, for a Signer of LoadFile, is told when the key file
	// changed: err nil when the new key is in use (warning, if any, is
	// about the file's mode), otherwise why the last good key stays. It
	// runs on the signing call's goroutine; neither argument carries key
	// material.
	OnReload func(warning string, err error)
}

// Signer mints the partner's JWTs. Safe for concurrent use.
type Signer struct {
	key      atomic.Pointer[signingKey]
	kid      string
	issuer   string
	signTTL  time.Duration
	tokenTTL time.Duration
	jwt      partnerprofile.JWT
	date     partnerprofile.DateEncoding // of a redemption
	now      func() time.Time
	file     *secretfile.File // nil unless LoadFile made the Signer
	onReload func(warning string, err error)
}

// signingKey is a key with its algorithm, swapped whole when the key file
// changes.
type signingKey struct {
	key       crypto.Signer
	method    jwt.SigningMethod
	algorithm string
}

// newSigningKey is key with the algorithm alg ("": the key's own).
func newSigningKey(key crypto.Signer, alg string) (*signingKey, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if k.N.BitLen() < 2048 {
			return nil, ErrUnsupportedKey
		}
		switch alg {
		case "", partnerprofile.AlgRS256:
			return &signingKey{key: key, method: jwt.SigningMethodRS256, algorithm: partnerprofile.AlgRS256}, nil
		case partnerprofile.AlgPS256:
			return &signingKey{key: key, method: jwt.SigningMethodPS256, algorithm: partnerprofile.AlgPS256}, nil
		}
		return nil, fmt.Errorf("signing: algorithm %s needs a P-256 ECDSA key, and the key is RSA", alg)
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, ErrUnsupportedKey
		}
		if alg != "" && alg != partnerprofile.AlgES256 {
			return nil, fmt.Errorf("signing: algorithm %s needs an RSA key, and the key is ECDSA P-256", alg)
		}
		return &signingKey{key: key, method: jwt.SigningMethodES256, algorithm: partnerprofile.AlgES256}, nil
	}
	return nil, ErrUnsupportedKey
}

// ErrUnsupportedKey is returned for keys that are neither RSA (≥ 2048 bits)
// nor ECDSA on P-256.
var ErrUnsupportedKey = errors.New("signing: unsupported key: want RSA (2048 bits or more) or ECDSA P-256")

// ParsePrivateKeyPEM reads the first private key block of data: PKCS#1
// ("RSA PRIVATE KEY"), SEC1 ("EC PRIVATE KEY") or PKCS#8 ("PRIVATE KEY").
// Errors never quote the input.
func ParsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("signing: no PEM private key block found")
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("signing: encrypted PEM keys are not supported; decrypt the key into a secret file")
		default:
			continue // e.g. EC PARAMETERS before the key, or a certificate
		}
		if err != nil {
			// x509 errors describe the structure, never the key bytes.
			return nil, fmt.Errorf("signing: parse %s block: %w", block.Type, err)
		}
		s, ok := key.(crypto.Signer)
		if !ok {
			return nil, ErrUnsupportedKey
		}
		return s, nil
	}
}

// LoadFile reads a PEM private key from the secret file at path (bounded,
// regular files only: internal/secretfile) and returns a Signer for it,
// with a warning when the file's mode lets others read it. The Signer
// follows the file: before each sign or partner token it stats the file
// and, when it changed (a rotated Kubernetes Secret), reads and uses the
// new key. A key that cannot be read or is not supported leaves the last
// good one in use; opts.OnReload is told either way.
func LoadFile(path string, opts Options) (_ *Signer, warning string, err error) {
	f, warning, err := secretfile.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("signing: read key file: %w", err)
	}
	data, _, _, _ := f.Current()
	key, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, "", fmt.Errorf("signing: key file %s: %w", path, err)
	}
	s, err := New(key, opts)
	if err != nil {
		return nil, "", fmt.Errorf("signing: key file %s: %w", path, err)
	}
	s.file, s.onReload = f, opts.OnReload
	return s, warning, nil
}

// reload swaps in the key file's new key, if it changed.
func (s *Signer) reload() {
	if s.file == nil {
		return
	}
	data, changed, warning, err := s.file.Current()
	if !changed && err == nil {
		return
	}
	if err == nil {
		var key crypto.Signer
		if key, err = ParsePrivateKeyPEM(data); err == nil {
			var k *signingKey
			if k, err = newSigningKey(key, s.jwt.Algorithm); err == nil {
				s.key.Store(k)
			}
		}
	}
	if err != nil {
		err = fmt.Errorf("signing: key file %s changed; the previous key stays in use: %w", s.file.Path(), err)
	}
	if s.onReload != nil {
		s.onReload(warning, err)
	}
}

// New returns a Signer for key: by default RS256 for an RSA key, ES256
// for a P-256 ECDSA key (opts.Profile may ask PS256 of an RSA key).
func New(key crypto.Signer, opts Options) (*Signer, error) {
	var errs []error
	if err := opts.Profile.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("signing: partner profile: %w", err))
	}
	prof := opts.Profile.WithDefaults()
	s := &Signer{kid: opts.KID, issuer: prof.JWT.IssuerFor(opts.Issuer), signTTL: opts.SignTTL,
		tokenTTL: opts.PartnerTokenTTL, now: opts.Now, jwt: prof.JWT, date: prof.RedemptionDateEncoding()}
	if k, err := newSigningKey(key, s.jwt.Algorithm); err != nil {
		errs = append(errs, err)
	} else {
		s.key.Store(k)
	}
	if s.issuer == "" {
		errs = append(errs, errors.New("signing: Issuer (the partner client_id) is required"))
	}
	if s.signTTL == 0 {
		s.signTTL = s.jwt.Sign.Lifetime
	}
	if s.tokenTTL == 0 {
		s.tokenTTL = s.jwt.PartnerToken.Lifetime
	}
	if s.signTTL < 0 || s.signTTL > MaxSignTTL {
		errs = append(errs, fmt.Errorf("signing: SignTTL must be in (0, %s]", MaxSignTTL))
	}
	if s.tokenTTL < 0 || s.tokenTTL > MaxPartnerTokenTTL {
		errs = append(errs, fmt.Errorf("signing: PartnerTokenTTL must be in (0, %s]", MaxPartnerTokenTTL))
	}
	if s.now == nil {
		s.now = time.Now
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// PublicKey is the public half of the key in use, for registering with the
// service (or the simulator).
func (s *Signer) PublicKey() crypto.PublicKey { return s.key.Load().key.Public() }

// KID is the key id put in the `kid` header ("" when none).
func (s *Signer) KID() string { return s.kid }

// Algorithm is "RS256" or "ES256", that of the key in use.
func (s *Signer) Algorithm() string { return s.key.Load().algorithm }

// Issuer is the `iss` claim (the partner client_id unless the profile
// names another).
func (s *Signer) Issuer() string { return s.issuer }

// Redemption is what a redemption sign may cover; each field must equal
// the request body's. Which fields the sign covers, and under which
// claim names, is the profile's (partnerprofile.JWT.SignClaims).
type Redemption struct {
	LoyaltyID         string
	TransactionID     string
	UsedPoint         int64
	TransactionAmount float64
	// TransactionDate is the body's text, byte for byte (its digits when
	// the profile sends it as a JSON number).
	TransactionDate string
	// TransactionDes is the body's transactionDes ("" when it has none).
	TransactionDes string
}

// RedemptionClaims are the claims of a redemption sign of the default
// profile, for a reader that decodes one.
type RedemptionClaims struct {
	jwt.RegisteredClaims
	Type              string  `json:"typ"`
	LoyaltyID         string  `json:"loyaltyId"`
	TransactionID     string  `json:"transactionId"`
	UsedPoint         int64   `json:"usedPoint"`
	TransactionAmount float64 `json:"transactionAmount"`
	TransactionDate   string  `json:"transactionDate"`
}

// RedemptionSign returns the `sign` JWT for r, with the claims of
// RedemptionSignClaims. Every call makes a new sign (with the default
// profile, a new jti): a sign is good for one request.
func (s *Signer) RedemptionSign(r Redemption) (string, error) {
	c, err := s.RedemptionSignClaims(r)
	if err != nil {
		return "", err
	}
	return s.sign(c, "redemption sign", r.TransactionID)
}

// RedemptionSignClaims are the claims a sign of r carries, as the profile
// says: iss, aud, typ, iat, exp (the sign's lifetime after iat), jti, and
// the body fields it covers, each as it travels in the body or as a
// string. By default aud RedemptionSignAudience, typ RedemptionSignType, a
// random jti, and loyaltyId, transactionId, usedPoint, transactionAmount
// and transactionDate as in the body.
func (s *Signer) RedemptionSignClaims(r Redemption) (jwt.MapClaims, error) {
	if r.TransactionID == "" || r.LoyaltyID == "" {
		return nil, errors.New("signing: redemption sign needs loyaltyId and transactionId")
	}
	c := s.registered(s.jwt.Sign, s.signTTL, r.TransactionID)
	for _, f := range s.jwt.SignClaims {
		v, err := s.bodyValue(r, f.Field)
		if err != nil {
			return nil, fmt.Errorf("signing: redemption sign for transaction %s: %w", r.TransactionID, err)
		}
		if f.Encoding == partnerprofile.ClaimAsString {
			if text, isString := v.(string); !isString {
				v = fmt.Sprint(jsonText(v))
			} else {
				v = text
			}
		}
		c[f.Claim] = v
	}
	return c, nil
}

// bodyValue is field of r as a JSON value travels in the body.
func (s *Signer) bodyValue(r Redemption, field string) (any, error) {
	switch field {
	case "loyaltyId":
		return r.LoyaltyID, nil
	case "transactionId":
		return r.TransactionID, nil
	case "usedPoint":
		return r.UsedPoint, nil
	case "transactionAmount":
		return r.TransactionAmount, nil
	case "transactionDes":
		return r.TransactionDes, nil
	case "transactionDate":
		if s.date.Type != partnerprofile.DateNumber {
			return r.TransactionDate, nil
		}
		n, err := strconv.ParseInt(r.TransactionDate, 10, 64)
		if err != nil {
			return nil, errors.New("transactionDate travels as a JSON number (the partner profile) but is not one")
		}
		return n, nil
	}
	return nil, fmt.Errorf("no body field %q", field)
}

// jsonText is v's JSON text, as encoding/json writes it in the body.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// registered are the registered claims of a JWT of kind k.
func (s *Signer) registered(k partnerprofile.Claims, ttl time.Duration, txID string) jwt.MapClaims {
	now := s.now()
	c := jwt.MapClaims{"iss": s.issuer, "iat": jwt.NewNumericDate(now), "exp": jwt.NewNumericDate(now.Add(ttl))}
	if k.Audience != partnerprofile.None {
		c["aud"] = jwt.ClaimStrings{k.Audience}
	}
	if k.Type != partnerprofile.None {
		c["typ"] = k.Type
	}
	switch k.JTI {
	case partnerprofile.JTIRandom:
		c["jti"] = rand.Text()
	case partnerprofile.JTITransactionID:
		c["jti"] = txID
	}
	return c
}

// PartnerToken returns a fresh partner token for exchange-token, with the
// claims of PartnerTokenClaims.
func (s *Signer) PartnerToken() (string, error) {
	return s.sign(s.PartnerTokenClaims(), "partner token", "")
}

// PartnerTokenClaims are the claims a new partner token carries: iss,
// iat, exp (the token's lifetime after iat), and as the profile says aud,
// typ and jti; by default aud PartnerTokenAudience, typ PartnerTokenType
// and a random jti, which the service accepts once.
func (s *Signer) PartnerTokenClaims() jwt.MapClaims {
	return s.registered(s.jwt.PartnerToken, s.tokenTTL, "")
}

// PartnerTokenClaims are the claims of a partner token of the default
// profile, for a reader that decodes one.
type PartnerTokenClaims struct {
	jwt.RegisteredClaims
	Type string `json:"typ"`
}

// Header is the JOSE header of the JWTs the Signer makes.
func (s *Signer) Header() map[string]any {
	h := map[string]any{"alg": s.Algorithm(), "typ": "JWT"}
	if s.kid != "" {
		h["kid"] = s.kid
	}
	return h
}

func (s *Signer) sign(c jwt.Claims, what, txID string) (string, error) {
	s.reload()
	k := s.key.Load()
	t := jwt.NewWithClaims(k.method, c)
	if s.kid != "" {
		t.Header["kid"] = s.kid
	}
	out, err := t.SignedString(k.key)
	if err != nil {
		if txID != "" {
			return "", fmt.Errorf("signing: %s for transaction %s: %w", what, txID, err)
		}
		return "", fmt.Errorf("signing: %s: %w", what, err)
	}
	return out, nil
}
