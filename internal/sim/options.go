package sim

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
)

// Demo credentials, used when Options leaves the corresponding field empty.
// They are public on purpose: the simulator is a sandbox.
const (
	DefaultClientID     = "loyalty-bridge"
	DefaultClientSecret = "demo-client-secret"
	DefaultUsername     = "demo-partner"
	DefaultPassword     = "demo-password"
)

// Defaults of Options.
const (
	DefaultMembers         = 100
	DefaultInitialBalance  = int64(1_000_000)
	DefaultEarnRate        = 0.001 // 1 point per 1,000 VND
	DefaultAccessTokenTTL  = 5 * time.Minute
	DefaultRefreshTokenTTL = 30 * time.Minute
	DefaultRetryAfter      = time.Second
	// NoRetryAfter, as Faults.RetryAfter, sends 429 and 503 answers
	// without a Retry-After header (any negative value does).
	NoRetryAfter = time.Duration(-1)

	// MaxBodyBytes bounds every request body; larger bodies are answered
	// 413 with the error envelope (code INVALID_REQUEST).
	MaxBodyBytes = 1 << 20
	// MaxMembers bounds the seeded population (memory is O(members)).
	MaxMembers = 10_000_000
	// DefaultClockSkew is how far a partner's clock may be off the
	// simulator's (Options.ClockSkew); MaxClockSkew bounds the option.
	DefaultClockSkew = 30 * time.Second
	MaxClockSkew     = 5 * time.Minute
	// DefaultMaxSignLifetime is the longest exp − iat of a redemption sign
	// (Options.MaxSignLifetime): the bridge's signer never makes a longer
	// one.
	DefaultMaxSignLifetime = signing.MaxSignTTL
	// DefaultReplayCacheSize is how many jtis of accepted partner JWTs are
	// remembered at most (Options.ReplayCacheSize).
	DefaultReplayCacheSize = 100_000
	// MaxPartnerTokenAhead is how far in the future a partner token's exp
	// (exchange-token) may lie.
	MaxPartnerTokenAhead = 5 * time.Minute
	// DefaultCapacity (Options.Capacity) is 0: no limit on business
	// requests handled at once.
	DefaultCapacity = 0
	// DefaultOverCapacityStatus answers a business request beyond
	// Options.Capacity (Options.OverCapacityStatus).
	DefaultOverCapacityStatus = http.StatusServiceUnavailable
)

// Sponsor identity reported in accrual results and transaction records.
const (
	SponsorID   = 1001
	SponsorName = "LOYALTY_PARTNER"
)

// MemberID is the loyaltyId of seeded (and onboarded) member i, 1-based:
// "LB00000001", "LB00000002", …
func MemberID(i int) string { return fmt.Sprintf("LB%08d", i) }

// PartnerKey is a partner public key the simulator trusts for exchange-token
// partner JWTs and redemption signs. KID is optional: a JWT whose header
// names a kid is verified only against keys with that KID; a JWT without
// one is tried against every key.
type PartnerKey struct {
	KID string
	Key crypto.PublicKey // *rsa.PublicKey (≥ 2048 bits, RS256) or *ecdsa.PublicKey (P-256, ES256)
}

func (k PartnerKey) validate() error {
	switch pk := k.Key.(type) {
	case *rsa.PublicKey:
		if pk == nil || pk.N == nil || pk.N.BitLen() < 2048 {
			return errors.New("RSA partner key must have at least 2048 bits")
		}
	case *ecdsa.PublicKey:
		if pk == nil || pk.Curve != elliptic.P256() {
			return errors.New("ECDSA partner key must be on P-256")
		}
	default:
		return fmt.Errorf("partner key of type %T: want *rsa.PublicKey or *ecdsa.PublicKey", k.Key)
	}
	return nil
}

// ParsePublicKeyPEM reads the first public key in data: a "PUBLIC KEY"
// (PKIX) or "RSA PUBLIC KEY" (PKCS#1) block, or the key of a
// "CERTIFICATE" block.
func ParsePublicKeyPEM(data []byte) (crypto.PublicKey, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM public key or certificate block found")
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				key = cert.PublicKey
			}
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("a private key was given: register the partner's public key only")
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parse %s block: %w", block.Type, err)
		}
		if err := (PartnerKey{Key: key}).validate(); err != nil {
			return nil, err
		}
		return key, nil
	}
}

// DuplicatePolicy says how a transactionId sent a second time (on accrual,
// or on redemption; each kind has its own namespace) is answered. The spec
// does not say ("Behaviour when a transactionId is sent twice: not
// shown"), so a client must be safe under each.
type DuplicatePolicy int

const (
	// DuplicateReject answers 400 with the profile's duplicate code
	// (DUPLICATE_TRANSACTION by default). The default.
	DuplicateReject DuplicatePolicy = iota
	// DuplicateReturnOriginal answers 200 with the first call's data
	// (same bitReference, requestId and timestamp) and applies nothing.
	DuplicateReturnOriginal
	// DuplicateApply applies the repeated transactionId again, as a
	// partner without duplicate detection would: a new transaction with
	// its own bitReference, the balance changed again, the ledger's
	// effects of the transactionId counted up (Effects, EffectsOver). A
	// lookup by transactionId still finds the first one. Only a client
	// that never repeats a write keeps every transaction at one effect.
	DuplicateApply
)

// String is the flag spelling: "reject", "return-original" or "apply".
func (p DuplicatePolicy) String() string {
	switch p {
	case DuplicateReject:
		return "reject"
	case DuplicateReturnOriginal:
		return "return-original"
	case DuplicateApply:
		return "apply"
	}
	return fmt.Sprintf("DuplicatePolicy(%d)", int(p))
}

// ParseDuplicatePolicy accepts "reject", "return-original" and "apply"
// ("" is reject).
func ParseDuplicatePolicy(s string) (DuplicatePolicy, error) {
	switch s {
	case "", "reject":
		return DuplicateReject, nil
	case "return-original":
		return DuplicateReturnOriginal, nil
	case "apply":
		return DuplicateApply, nil
	}
	return 0, fmt.Errorf("duplicate policy %q: want reject, return-original or apply", s)
}

// Options configures a Server. The zero value is a working sandbox with the
// demo credentials, 100 members and no faults.
type Options struct {
	// Partner client and the one user of the password grant. Empty → the
	// Default* demo values.
	ClientID, ClientSecret, Username, Password string
	// PartnerKeys verify exchange-token partner JWTs and redemption signs.
	// Without any, both always fail (401 and INVALID_SIGN).
	PartnerKeys []PartnerKey
	// AdminToken enables the admin HTTP API under /__sim/ (header
	// X-Sim-Admin-Token). Empty: the admin API answers 404. The typed Go
	// methods always work.
	AdminToken string
	// Members is the number of seeded members, MemberID(1)…MemberID(N)
	// (default 100), each with InitialBalance points (default 1,000,000),
	// not linked.
	Members        int
	InitialBalance int64
	// EarnRate is points per currency unit (default 0.001): an accrual of
	// amount A credits floor(A × EarnRate) points.
	EarnRate float64
	// Token lifetimes (defaults 5 min and 30 min); changeable at run time
	// with SetTokenTTLs.
	AccessTokenTTL  time.Duration
	RefreshTokenTTL time.Duration
	// DuplicatePolicy for a repeated transactionId (default reject).
	DuplicatePolicy DuplicatePolicy
	// Profile is how the Server answers where the spec is silent: the
	// first of its not-found, member-not-found and duplicate codes, its transactionType of
	// each kind and the first of its applied statuses. Zero value: the
	// defaults (partnerprofile.Default). Its date formats do not change
	// the Server, which reads either; its fractional points do not either:
	// the Server answers a redemption's usedPoint as it was sent, a
	// fraction included.
	Profile partnerprofile.Profile
	// StrictWire makes the Server require the Profile's wire choices where
	// the spec leaves them open, as a strict partner would: each
	// transactionDate in the profile's format and JSON type only, and an
	// onboarding's unset idNumber or passportNumber left out
	// (partnerprofile.KeyedAbsent: a null is refused) or keyed with null
	// (KeyedNull: a missing key is refused). Without it the Server reads
	// either date format and type, and either form of an unset document.
	// A refusal names the field as the bridge's wire-refused check reads
	// it: errors.code INVALID_REQUEST with errors.message
	// "transactionDate: …", or an onboarding's resultUrl errorCode
	// (MISSING_FIELD for a missing key, INVALID_REQUEST for a null) with
	// the field in its partnerprofile.FieldParam parameter. The sign's and partner token's claims are always the Profile's.
	StrictWire bool
	// StampProcessingTime makes a lookup's transactionTime the time the
	// Server processed the write, not the transactionDate sent: the spec
	// does not say which a partner answers, and by default the Server
	// echoes the date (processing time only when it cannot read it).
	StampProcessingTime bool
	// ClockSkew is how far a partner's clock may be off the Server's when a
	// partner JWT is checked (default DefaultClockSkew, 30 s; at most
	// MaxClockSkew): iat may be that far ahead, exp that far behind, and a
	// partner token's exp that much further than MaxPartnerTokenAhead.
	ClockSkew time.Duration
	// MaxSignLifetime caps a redemption sign's lifetime, exp − iat
	// (default DefaultMaxSignLifetime, 5 minutes); a longer-lived sign is
	// refused (INVALID_SIGN), so that a leaked sign is not good for long.
	MaxSignLifetime time.Duration
	// ReplayCacheSize bounds the jtis remembered so that each partner JWT
	// (partner token, redemption sign) is accepted once (default
	// DefaultReplayCacheSize, 100,000). A jti is forgotten once its JWT has
	// expired; while the cache is full of unexpired ones, new partner JWTs
	// are refused rather than a jti forgotten early, which would allow a
	// replay.
	ReplayCacheSize int
	// Capacity is how many business requests (the endpoints that take a
	// bearer token) are handled at once, like a partner gateway with a
	// fixed number of workers; DefaultCapacity, 0, is unlimited. The token
	// endpoints (token, exchange-token), the JWKS and the admin API are
	// not limited and do not count: a gateway limits the API, not the
	// identity provider. A request beyond the limit is answered at once,
	// without being handled, with OverCapacityStatus in the error envelope
	// (code OVER_CAPACITY) and Faults.RetryAfter's Retry-After (none when
	// NoRetryAfter); Calls counts it under that status and OverCapacity
	// per endpoint. A request holds its place from arrival until its
	// answer is ready, injected latency and hangs included, and frees it
	// before the answer is written: a client holding an answer may send
	// again at once.
	Capacity int
	// OverCapacityStatus is 503 (DefaultOverCapacityStatus) or 429.
	OverCapacityStatus int
	// Faults in force from the start (none by default); see SetFaults.
	Faults Faults
	// Seed makes fault decisions and latency samples deterministic.
	Seed int64
	// Logger receives one line per state change (nil: no logging). It never
	// sees secrets, tokens or personal data.
	Logger *zap.Logger
	// Now is the clock for token lifetimes and timestamps (nil: time.Now).
	// Fault latency always uses real time.
	Now func() time.Time
}

// withDefaults fills zero values and reports every invalid setting together.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	if o.ClientID == "" {
		o.ClientID = DefaultClientID
	}
	if o.ClientSecret == "" {
		o.ClientSecret = DefaultClientSecret
	}
	if o.Username == "" {
		o.Username = DefaultUsername
	}
	if o.Password == "" {
		o.Password = DefaultPassword
	}
	switch {
	case o.Members == 0:
		o.Members = DefaultMembers
	case o.Members < 0 || o.Members > MaxMembers:
		errs = append(errs, fmt.Errorf("sim: Members must be in [0, %d]", MaxMembers))
	}
	switch {
	case o.InitialBalance == 0:
		o.InitialBalance = DefaultInitialBalance
	case o.InitialBalance < 0:
		errs = append(errs, errors.New("sim: InitialBalance must not be negative"))
	}
	switch {
	case o.EarnRate == 0:
		o.EarnRate = DefaultEarnRate
	case o.EarnRate < 0 || math.IsNaN(o.EarnRate) || math.IsInf(o.EarnRate, 0):
		errs = append(errs, errors.New("sim: EarnRate must be a positive number"))
	}
	switch {
	case o.AccessTokenTTL == 0:
		o.AccessTokenTTL = DefaultAccessTokenTTL
	case o.AccessTokenTTL < time.Second:
		errs = append(errs, errors.New("sim: AccessTokenTTL must be at least 1s"))
	}
	switch {
	case o.RefreshTokenTTL == 0:
		o.RefreshTokenTTL = DefaultRefreshTokenTTL
	case o.RefreshTokenTTL < time.Second:
		errs = append(errs, errors.New("sim: RefreshTokenTTL must be at least 1s"))
	}
	switch {
	case o.ClockSkew == 0:
		o.ClockSkew = DefaultClockSkew
	case o.ClockSkew < 0 || o.ClockSkew > MaxClockSkew:
		errs = append(errs, fmt.Errorf("sim: ClockSkew must be in [0, %s]", MaxClockSkew))
	}
	switch {
	case o.MaxSignLifetime == 0:
		o.MaxSignLifetime = DefaultMaxSignLifetime
	case o.MaxSignLifetime < time.Second:
		errs = append(errs, errors.New("sim: MaxSignLifetime must be at least 1s"))
	}
	switch {
	case o.ReplayCacheSize == 0:
		o.ReplayCacheSize = DefaultReplayCacheSize
	case o.ReplayCacheSize < 0:
		errs = append(errs, errors.New("sim: ReplayCacheSize must not be negative"))
	}
	if o.Capacity < 0 {
		errs = append(errs, errors.New("sim: Capacity must not be negative (0 is unlimited)"))
	}
	switch o.OverCapacityStatus {
	case 0:
		o.OverCapacityStatus = DefaultOverCapacityStatus
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
	default:
		errs = append(errs, fmt.Errorf("sim: OverCapacityStatus %d: want 429 or 503", o.OverCapacityStatus))
	}
	if err := o.Profile.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("sim: Profile: %w", err))
	}
	o.Profile = o.Profile.WithDefaults()
	if o.DuplicatePolicy < DuplicateReject || o.DuplicatePolicy > DuplicateApply {
		errs = append(errs, fmt.Errorf("sim: unknown %s", o.DuplicatePolicy))
	}
	for i, k := range o.PartnerKeys {
		if err := k.validate(); err != nil {
			errs = append(errs, fmt.Errorf("sim: PartnerKeys[%d]: %w", i, err))
		}
	}
	if err := o.Faults.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("sim: Faults: %w", err))
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, errors.Join(errs...)
}
