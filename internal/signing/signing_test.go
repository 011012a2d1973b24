package signing_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"

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

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key.pem")
	sec1, _ := x509.MarshalECPrivateKey(testEC(t))
	if err := os.WriteFile(path, pemOf(t, "EC PRIVATE KEY", sec1), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := signing.LoadFile(path, signing.Options{Issuer: "p", KID: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if s.KID() != "k1" || s.Issuer() != "p" {
		t.Fatalf("kid %q issuer %q", s.KID(), s.Issuer())
	}
	if _, err := signing.LoadFile(filepath.Join(t.TempDir(), "missing"), signing.Options{Issuer: "p"}); err == nil {
		t.Fatal("missing file accepted")
	}
}

func verify(t *testing.T, tok string, pub crypto.PublicKey, claims jwt.Claims) *jwt.Token {
	t.Helper()
	parsed, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{"RS256", "ES256"}), jwt.WithTimeFunc(func() time.Time { return fixed }))
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
		if c.Issuer != "partner-app" || c.ID != "tx-1" || c.LoyaltyID != r.LoyaltyID || c.TransactionID != r.TransactionID ||
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
