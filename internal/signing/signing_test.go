package signing_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

func testRSA(t testing.TB) *rsa.PrivateKey {
	rsaOnce.Do(func() {
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	return rsaKey
}

func testEC(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pemOf(t testing.TB, typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func TestParsePrivateKeyPEM(t *testing.T) {
	rk := testRSA(t)
	ek := testEC(t)
	pk8r, _ := x509.MarshalPKCS8PrivateKey(rk)
	pk8e, _ := x509.MarshalPKCS8PrivateKey(ek)
	sec1, _ := x509.MarshalECPrivateKey(ek)
	cases := []struct {
		name string
		data []byte
		alg  string
	}{
		{"pkcs1", pemOf(t, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rk)), "RS256"},
		{"pkcs8-rsa", pemOf(t, "PRIVATE KEY", pk8r), "RS256"},
		{"pkcs8-ec", pemOf(t, "PRIVATE KEY", pk8e), "ES256"},
		{"sec1", pemOf(t, "EC PRIVATE KEY", sec1), "ES256"},
		{"sec1-with-params", append(pemOf(t, "EC PARAMETERS", []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}), pemOf(t, "EC PRIVATE KEY", sec1)...), "ES256"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key, err := signing.ParsePrivateKeyPEM(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			s, err := signing.New(key, signing.Options{Issuer: "partner"})
			if err != nil {
				t.Fatal(err)
			}
			if s.Algorithm() != tc.alg {
				t.Fatalf("algorithm %s, want %s", s.Algorithm(), tc.alg)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	garbage := pemOf(t, "RSA PRIVATE KEY", []byte("SECRETSECRETSECRET"))
	for name, data := range map[string][]byte{
		"empty":     nil,
		"no-key":    pemOf(t, "CERTIFICATE", []byte{1, 2, 3}),
		"garbage":   garbage,
		"encrypted": pemOf(t, "ENCRYPTED PRIVATE KEY", []byte{1}),
	} {
		_, err := signing.ParsePrivateKeyPEM(data)
		if err == nil {
			t.Errorf("%s: want error", name)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: error quotes the key: %v", name, err)
		}
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	if _, err := signing.New(small, signing.Options{Issuer: "p"}); err == nil {
		t.Error("1024-bit RSA accepted")
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if _, err := signing.New(p384, signing.Options{Issuer: "p"}); err == nil {
		t.Error("P-384 accepted for ES256")
	}
	if _, err := signing.New(testEC(t), signing.Options{}); err == nil {
		t.Error("missing issuer accepted")
	}
	if _, err := signing.New(testEC(t), signing.Options{Issuer: "p", PartnerTokenTTL: 6 * time.Minute}); err == nil {
		t.Error("partner token TTL over 5 minutes accepted")
	}
}

// Both lifetimes are capped: a sign valid for years is refused at New, so
// the signer never makes one the service refuses.
func TestTTLLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts signing.Options
		ok   bool
	}{
		{"defaults", signing.Options{}, true},
		{"sign at the cap", signing.Options{SignTTL: signing.MaxSignTTL}, true},
		{"sign over the cap", signing.Options{SignTTL: signing.MaxSignTTL + time.Second}, false},
		{"sign for ten years", signing.Options{SignTTL: 10 * 365 * 24 * time.Hour}, false},
		{"sign negative", signing.Options{SignTTL: -time.Second}, false},
		{"partner token at the cap", signing.Options{PartnerTokenTTL: signing.MaxPartnerTokenTTL}, true},
		{"partner token over the cap", signing.Options{PartnerTokenTTL: signing.MaxPartnerTokenTTL + time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Issuer = "p"
			_, err := signing.New(testEC(t), tc.opts)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// kindClaims are the claims every partner JWT carries, whatever its kind.
type kindClaims struct {
	jwt.RegisteredClaims
	Type string `json:"typ"`
}

// Each kind carries its own aud and typ, a jti and exp within its cap, and
// a header typ of "JWT" that any verifier accepts.
func TestClaimsPerKind(t *testing.T) {
	s, err := signing.New(testEC(t), signing.Options{Issuer: "partner-app", Now: func() time.Time { return fixed }})
	if err != nil {
		t.Fatal(err)
	}
	sign := func() (string, error) {
		return s.RedemptionSign(signing.Redemption{LoyaltyID: "LB00000001", TransactionID: "tx-1", UsedPoint: 5, TransactionDate: "d"})
	}
	cases := []struct {
		name     string
		mint     func() (string, error)
		aud, typ string
		maxTTL   time.Duration
	}{
		{"redemption sign", sign, signing.RedemptionSignAudience, signing.RedemptionSignType, signing.MaxSignTTL},
		{"partner token", s.PartnerToken, signing.PartnerTokenAudience, signing.PartnerTokenType, signing.MaxPartnerTokenTTL},
	}
	seen := map[string]string{} // aud and typ → kind
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := tc.mint()
			if err != nil {
				t.Fatal(err)
			}
			var c kindClaims
			parsed := verify(t, tok, s.PublicKey(), &c)
			if parsed.Header["typ"] != "JWT" {
				t.Errorf("header typ %v", parsed.Header["typ"])
			}
			if len(c.Audience) != 1 || c.Audience[0] != tc.aud || c.Type != tc.typ {
				t.Errorf("aud %v typ %q, want %s and %s", c.Audience, c.Type, tc.aud, tc.typ)
			}
			if c.ID == "" || c.IssuedAt == nil || c.ExpiresAt == nil {
				t.Fatalf("jti %q iat %v exp %v", c.ID, c.IssuedAt, c.ExpiresAt)
			}
			if life := c.ExpiresAt.Sub(c.IssuedAt.Time); life <= 0 || life > tc.maxTTL {
				t.Errorf("lifetime %s, want (0, %s]", life, tc.maxTTL)
			}
			// Strict verifiers of the other kind refuse it.
			other := signing.PartnerTokenAudience
			if tc.aud == other {
				other = signing.RedemptionSignAudience
			}
			_, err = jwt.ParseWithClaims(tok, &kindClaims{}, func(*jwt.Token) (any, error) { return s.PublicKey(), nil },
				jwt.WithTimeFunc(func() time.Time { return fixed }), jwt.WithAudience(other))
			if !errors.Is(err, jwt.ErrTokenInvalidAudience) {
				t.Errorf("accepted for aud %s: %v", other, err)
			}
			for _, v := range []string{"aud " + tc.aud, "typ " + tc.typ} {
				if prev, dup := seen[v]; dup {
					t.Errorf("%s shared with %s", v, prev)
				}
				seen[v] = tc.name
			}
		})
	}
}

// Every call mints a new jti, never derived from the transaction: two
// signs of the same redemption differ, and no jti repeats across kinds or
// concurrent callers.
func TestJTIUniquePerCall(t *testing.T) {
	s, err := signing.New(testEC(t), signing.Options{Issuer: "partner-app", Now: func() time.Time { return fixed }})
	if err != nil {
		t.Fatal(err)
	}
	r := signing.Redemption{LoyaltyID: "LB00000001", TransactionID: "tx-same", UsedPoint: 5, TransactionDate: "d"}
	const perKind = 50
	var (
		mu   sync.Mutex
		jtis = map[string]int{}
		wg   sync.WaitGroup
	)
	for range perKind {
		for _, mint := range []func() (string, error){func() (string, error) { return s.RedemptionSign(r) }, s.PartnerToken} {
			wg.Go(func() {
				tok, err := mint()
				if err != nil {
					t.Error(err)
					return
				}
				var c kindClaims
				if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				jtis[c.ID]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if len(jtis) != 2*perKind {
		t.Fatalf("%d distinct jtis of %d", len(jtis), 2*perKind)
	}
	for jti := range jtis {
		// 128 random bits, base32: 26 characters.
		if jti == r.TransactionID || len(jti) < 22 {
			t.Fatalf("jti %q is not random", jti)
		}
	}
}

// LoadFile reads the key through internal/secretfile, and follows the
// file: a rotated key is used from the next token on, and a broken one
// leaves the last good key in use.
func TestLoadFileFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key.pem")
	write := func(data []byte) {
		t.Helper()
		old, statErr := os.Stat(path)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if statErr == nil { // the mtime moves even on a coarse clock
			if err := os.Chtimes(path, time.Time{}, old.ModTime().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	keyPEM := func(k *ecdsa.PrivateKey) []byte {
		der, _ := x509.MarshalECPrivateKey(k)
		return pemOf(t, "EC PRIVATE KEY", der)
	}
	first, second := testEC(t), testEC(t)
	write(keyPEM(first))
	var reloads []error
	s, warning, err := signing.LoadFile(path, signing.Options{Issuer: "p", KID: "k1", Now: func() time.Time { return fixed },
		OnReload: func(_ string, err error) { reloads = append(reloads, err) }})
	if err != nil || warning != "" {
		t.Fatalf("LoadFile: %v (warning %q)", err, warning)
	}
	if s.KID() != "k1" || s.Issuer() != "p" {
		t.Fatalf("kid %q issuer %q", s.KID(), s.Issuer())
	}
	signedBy := func(pub crypto.PublicKey) {
		t.Helper()
		tok, err := s.PartnerToken()
		if err != nil {
			t.Fatal(err)
		}
		verify(t, tok, pub, &signing.PartnerTokenClaims{})
	}
	signedBy(first.Public())
	if len(reloads) != 0 {
		t.Fatalf("reloads %v of an unchanged file", reloads)
	}
	write(keyPEM(second))
	signedBy(second.Public())
	if len(reloads) != 1 || reloads[0] != nil || !s.PublicKey().(*ecdsa.PublicKey).Equal(second.Public()) {
		t.Fatalf("after a rotation: reloads %v", reloads)
	}
	write([]byte("not a key"))
	signedBy(second.Public())
	signedBy(second.Public())
	if len(reloads) != 2 || reloads[1] == nil || strings.Contains(reloads[1].Error(), "not a key") {
		t.Fatalf("after a broken key: reloads %v", reloads)
	}

	for name, p := range map[string]string{"missing": filepath.Join(t.TempDir(), "missing"), "a directory": t.TempDir()} {
		if _, _, err := signing.LoadFile(p, signing.Options{Issuer: "p"}); err == nil {
			t.Fatalf("%s accepted", name)
		}
	}
}

func verify(t *testing.T, tok string, pub crypto.PublicKey, claims jwt.Claims) *jwt.Token {
	t.Helper()
	parsed, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{"RS256", "PS256", "ES256"}), jwt.WithTimeFunc(func() time.Time { return fixed }))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return parsed
}

var fixed = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestRedemptionSign(t *testing.T) {
	for _, key := range []crypto.Signer{testRSA(t), testEC(t)} {
		s, err := signing.New(key, signing.Options{Issuer: "partner-app", KID: "kid-1", Now: func() time.Time { return fixed }})
		if err != nil {
			t.Fatal(err)
		}
		r := signing.Redemption{LoyaltyID: "LB00000001", TransactionID: "tx-1", UsedPoint: 50,
			TransactionAmount: 150000.5, TransactionDate: "2026-11-22T10:00:00.000Z"}
		tok, err := s.RedemptionSign(r)
		if err != nil {
			t.Fatal(err)
		}
		var c signing.RedemptionClaims
		parsed := verify(t, tok, s.PublicKey(), &c)
		if parsed.Header["kid"] != "kid-1" || parsed.Header["alg"] != s.Algorithm() {
			t.Fatalf("header %v", parsed.Header)
		}
		if c.Issuer != "partner-app" || c.ID == "" || c.ID == r.TransactionID || c.LoyaltyID != r.LoyaltyID || c.TransactionID != r.TransactionID ||
			c.UsedPoint != 50 || c.TransactionAmount != 150000.5 || c.TransactionDate != r.TransactionDate {
			t.Fatalf("claims %+v", c)
		}
		if !c.IssuedAt.Equal(fixed) || !c.ExpiresAt.Equal(fixed.Add(signing.DefaultSignTTL)) {
			t.Fatalf("iat %v exp %v", c.IssuedAt, c.ExpiresAt)
		}
	}
}

func TestPartnerToken(t *testing.T) {
	s, err := signing.New(testEC(t), signing.Options{Issuer: "partner-app", Now: func() time.Time { return fixed }})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			tok, err := s.PartnerToken()
			if err != nil {
				t.Error(err)
				return
			}
			var c jwt.RegisteredClaims
			verify(t, tok, s.PublicKey(), &c)
			if c.Issuer != "partner-app" || c.ID == "" || c.ExpiresAt.Sub(c.IssuedAt.Time) > signing.MaxPartnerTokenTTL {
				t.Errorf("claims %+v", c)
			}
			mu.Lock()
			seen[c.ID] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(seen) != 20 {
		t.Fatalf("jti not unique: %d distinct of 20", len(seen))
	}
}

func TestTamperedSignFailsVerification(t *testing.T) {
	s, _ := signing.New(testEC(t), signing.Options{Issuer: "p", Now: func() time.Time { return fixed }})
	tok, err := s.RedemptionSign(signing.Redemption{LoyaltyID: "L", TransactionID: "T", UsedPoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	forged, _ := signing.New(testEC(t), signing.Options{Issuer: "p", Now: func() time.Time { return fixed }})
	other, _ := forged.RedemptionSign(signing.Redemption{LoyaltyID: "L", TransactionID: "T", UsedPoint: 1000})
	tampered := strings.Split(other, ".")[0] + "." + strings.Split(other, ".")[1] + "." + parts[2]
	_, err = jwt.Parse(tampered, func(*jwt.Token) (any, error) { return s.PublicKey(), nil }, jwt.WithTimeFunc(func() time.Time { return fixed }))
	if err == nil {
		t.Fatal("tampered token verified")
	}
}

// Another partner's profile: every claim the profile names is made as it
// says, and nothing of the default's is left over.
func TestProfileClaims(t *testing.T) {
	prof := partnerprofile.Profile{RedemptionDateFormat: partnerprofile.DateEpochSeconds, RedemptionDateType: partnerprofile.DateNumber,
		JWT: partnerprofile.JWT{Algorithm: partnerprofile.AlgPS256, Issuer: "shop-1",
			Sign:         partnerprofile.Claims{Audience: "loyalty", Type: partnerprofile.None, Lifetime: time.Minute, JTI: partnerprofile.JTITransactionID},
			PartnerToken: partnerprofile.Claims{Audience: partnerprofile.None, Type: "pt", Lifetime: 90 * time.Second, JTI: partnerprofile.JTINone},
			SignClaims: []partnerprofile.SignClaim{{Field: "transactionId", Claim: "txn"}, {Field: "usedPoint", Encoding: partnerprofile.ClaimAsString},
				{Field: "transactionDate"}, {Field: "transactionDes", Claim: "des"}}}}
	s, err := signing.New(testRSA(t), signing.Options{Issuer: "client-id", Profile: prof, Now: func() time.Time { return fixed }})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.RedemptionSign(signing.Redemption{LoyaltyID: "LB1", TransactionID: "tx-1", UsedPoint: 40, TransactionAmount: 10,
		TransactionDate: "1795428000", TransactionDes: "voucher"})
	if err != nil {
		t.Fatal(err)
	}
	var c jwt.MapClaims
	parsed := verify(t, tok, s.PublicKey(), &c)
	want := jwt.MapClaims{"iss": "shop-1", "aud": []any{"loyalty"}, "iat": float64(fixed.Unix()), "exp": float64(fixed.Add(time.Minute).Unix()),
		"jti": "tx-1", "txn": "tx-1", "usedPoint": "40", "transactionDate": float64(1795428000), "des": "voucher"}
	if parsed.Header["alg"] != "PS256" || !reflect.DeepEqual(c, want) {
		t.Fatalf("header %v claims\n%v, want\n%v", parsed.Header, c, want)
	}
	tok, err = s.PartnerToken()
	if err != nil {
		t.Fatal(err)
	}
	c = jwt.MapClaims{}
	verify(t, tok, s.PublicKey(), &c)
	want = jwt.MapClaims{"iss": "shop-1", "typ": "pt", "iat": float64(fixed.Unix()), "exp": float64(fixed.Add(90 * time.Second).Unix())}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("partner token claims %v, want %v", c, want)
	}
	// A date that the profile sends as a number must be one.
	if _, err := s.RedemptionSign(signing.Redemption{LoyaltyID: "LB1", TransactionID: "tx-1", UsedPoint: 1, TransactionDate: "2026-11-27"}); err == nil ||
		!strings.Contains(err.Error(), "transactionDate travels as a JSON number") {
		t.Fatalf("want the date refused, got %v", err)
	}
	// The algorithm must fit the key.
	if _, err := signing.New(testEC(t), signing.Options{Issuer: "p", Profile: prof}); err == nil || !strings.Contains(err.Error(), "PS256 needs an RSA key") {
		t.Fatalf("PS256 with an EC key: %v", err)
	}
}
