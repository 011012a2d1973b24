package signing

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/loyalty-bridge/loyalty-bridge/internal/secretfile"
)

// MaxPartnerTokenTTL is the longest lifetime the partner API accepts for a
// partner token (its exp may be at most five minutes ahead).
const MaxPartnerTokenTTL = 5 * time.Minute

// MaxSignTTL is the longest lifetime (exp − iat) given to a redemption
// sign. A sign is made for one request sent at once; the simulator refuses
// longer-lived ones by default (sim.DefaultMaxSignLifetime reads this).
const MaxSignTTL = 5 * time.Minute

// The `aud` and `typ` claims that tell the two JWTs apart, so that neither
// is accepted where the other is expected. aud names the endpoint the JWT
// is for, by the spec's path (independent of {base_url}); typ is a claim,
// as Keycloak types its own tokens, while the header's `typ` stays "JWT"
// (some verifiers accept no other value there).
const (
	RedemptionSignAudience = "/api-point/partner/v1/point-redemption-with-token"
	RedemptionSignType     = "redemption-sign"
	PartnerTokenAudience   = "/api-identity/public/v1/exchange-token"
	PartnerTokenType       = "partner-token"
)

// Defaults of Options.
const (
	DefaultSignTTL         = 2 * time.Minute
	DefaultPartnerTokenTTL = 2 * time.Minute
)

// Options configures a Signer. Issuer is required; the rest have defaults.
type Options struct {
	// Issuer is the partner's client_id, sent as `iss`.
	Issuer string
	// KID, when set, is put in the JWT header as `kid` so the service can
	// pick the registered public key.
	KID string
	// SignTTL is the lifetime of a redemption sign (default 2 minutes, at
	// most MaxSignTTL).
	SignTTL time.Duration
	// PartnerTokenTTL is the lifetime of a partner token (default 2
	// minutes, at most MaxPartnerTokenTTL).
	PartnerTokenTTL time.Duration
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

func newSigningKey(key crypto.Signer) (*signingKey, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if k.N.BitLen() < 2048 {
			return nil, ErrUnsupportedKey
		}
		return &signingKey{key: key, method: jwt.SigningMethodRS256, algorithm: "RS256"}, nil
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, ErrUnsupportedKey
		}
		return &signingKey{key: key, method: jwt.SigningMethodES256, algorithm: "ES256"}, nil
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
			if k, err = newSigningKey(key); err == nil {
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

// New returns a Signer for key: RS256 for an RSA key, ES256 for a P-256
// ECDSA key.
func New(key crypto.Signer, opts Options) (*Signer, error) {
	s := &Signer{kid: opts.KID, issuer: opts.Issuer, signTTL: opts.SignTTL,
		tokenTTL: opts.PartnerTokenTTL, now: opts.Now}
	var errs []error
	if k, err := newSigningKey(key); err != nil {
		errs = append(errs, err)
	} else {
		s.key.Store(k)
	}
	if s.issuer == "" {
		errs = append(errs, errors.New("signing: Issuer (the partner client_id) is required"))
	}
	if s.signTTL == 0 {
		s.signTTL = DefaultSignTTL
	}
	if s.tokenTTL == 0 {
		s.tokenTTL = DefaultPartnerTokenTTL
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

// Issuer is the `iss` claim (the partner client_id).
func (s *Signer) Issuer() string { return s.issuer }

// Redemption is what a redemption sign covers; each field must equal the
// request body's.
type Redemption struct {
	LoyaltyID         string
	TransactionID     string
	UsedPoint         int64
	TransactionAmount float64
	// TransactionDate is the body's string, byte for byte.
	TransactionDate string
}

// RedemptionClaims are the claims of a redemption sign.
type RedemptionClaims struct {
	jwt.RegisteredClaims
	Type              string  `json:"typ"`
	LoyaltyID         string  `json:"loyaltyId"`
	TransactionID     string  `json:"transactionId"`
	UsedPoint         int64   `json:"usedPoint"`
	TransactionAmount float64 `json:"transactionAmount"`
	TransactionDate   string  `json:"transactionDate"`
}

// RedemptionSign returns the `sign` JWT for r: aud RedemptionSignAudience,
// typ RedemptionSignType, a random jti, exp SignTTL after iat. Every call
// makes a new sign (a new jti): a sign is good for one request.
func (s *Signer) RedemptionSign(r Redemption) (string, error) {
	if r.TransactionID == "" || r.LoyaltyID == "" {
		return "", errors.New("signing: redemption sign needs loyaltyId and transactionId")
	}
	now := s.now()
	c := RedemptionClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    s.issuer,
			Audience:  jwt.ClaimStrings{RedemptionSignAudience},
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(s.signTTL)),
			ID:        rand.Text(),
		},
		Type:              RedemptionSignType,
		LoyaltyID:         r.LoyaltyID,
		TransactionID:     r.TransactionID,
		UsedPoint:         r.UsedPoint,
		TransactionAmount: r.TransactionAmount,
		TransactionDate:   r.TransactionDate,
	}
	return s.sign(c, "redemption sign", r.TransactionID)
}

// PartnerTokenClaims are the claims of a partner token.
type PartnerTokenClaims struct {
	jwt.RegisteredClaims
	Type string `json:"typ"`
}

// PartnerToken returns a fresh partner token for exchange-token: iss, aud
// PartnerTokenAudience, typ PartnerTokenType, iat, exp PartnerTokenTTL
// after iat and a random jti. The service accepts each jti once.
func (s *Signer) PartnerToken() (string, error) {
	now := s.now()
	c := PartnerTokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    s.issuer,
			Audience:  jwt.ClaimStrings{PartnerTokenAudience},
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(s.tokenTTL)),
			ID:        rand.Text(),
		},
		Type: PartnerTokenType,
	}
	return s.sign(c, "partner token", "")
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
