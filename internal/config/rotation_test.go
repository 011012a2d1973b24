package config

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
)

// writeSecret writes a secret file as a rotation does, moving its mtime
// on even where the clock is coarse.
func writeSecret(t *testing.T, path string, data []byte) {
	t.Helper()
	old, statErr := os.Stat(path)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if statErr == nil {
		if err := os.Chtimes(path, time.Time{}, old.ModTime().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

func ecKeyPEM(t *testing.T) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// The partner key file is read again when it changes: redemptions are
// signed with the rotated key without a restart, and a broken file leaves
// the last good key in use.
func TestPartnerKeyFileIsReadAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "partner.pem")
	first, firstPEM := ecKeyPEM(t)
	second, secondPEM := ecKeyPEM(t)
	writeSecret(t, path, firstPEM)
	c, err := parse(t, []string{"--partner-key", path}, creds)
	if err != nil {
		t.Fatal(err)
	}
	api, err := c.API.Build(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	signedBy := func(step string, pub crypto.PublicKey) {
		t.Helper()
		tok, err := api.Signer.RedemptionSign(signing.Redemption{LoyaltyID: "m", TransactionID: "tx", UsedPoint: 1, TransactionDate: "d"})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if _, err := jwt.ParseWithClaims(tok, &signing.RedemptionClaims{}, func(*jwt.Token) (any, error) { return pub, nil },
			jwt.WithValidMethods([]string{"ES256"})); err != nil {
			t.Fatalf("%s: the sign does not verify with the expected key: %v", step, err)
		}
	}
	signedBy("first key", first.Public())
	writeSecret(t, path, secondPEM)
	signedBy("rotated key", second.Public())
	writeSecret(t, path, []byte("-----BEGIN EC PRIVATE KEY-----\nbroken\n-----END EC PRIVATE KEY-----\n"))
	signedBy("broken file", second.Public())
}
