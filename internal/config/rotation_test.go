package config

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
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

// A refused password is not tried again for a while, but a password file
// rewritten meanwhile is tried at the next call, whatever the back-off.
func TestRewrittenPasswordFileEndsTheRefusedBackoff(t *testing.T) {
	s, err := sim.New(sim.Options{Members: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	pwFile := filepath.Join(t.TempDir(), "password")
	writeSecret(t, pwFile, []byte("wrong-password\n"))
	c, err := parse(t, nil, map[string]string{"LOYALTY_BRIDGE_API_BASE_URL": srv.URL,
		"LOYALTY_BRIDGE_API_CLIENT_ID": sim.DefaultClientID, "LOYALTY_BRIDGE_API_CLIENT_SECRET": sim.DefaultClientSecret,
		"LOYALTY_BRIDGE_API_USERNAME": sim.DefaultUsername, "LOYALTY_BRIDGE_API_PASSWORD_FILE": pwFile})
	if err != nil {
		t.Fatal(err)
	}
	api, err := c.API.Build(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	ctx := context.Background()
	if _, err := api.Tokens.Token(ctx); err == nil || tokensource.IsTransient(err) {
		t.Fatalf("login with a wrong password: %v", err)
	}
	// Asked again at once: the back-off answers, no login is made.
	var be *tokensource.BackoffError
	if _, err := api.Tokens.Token(ctx); !errors.As(err, &be) {
		t.Fatalf("during the back-off: %v", err)
	}
	if n := s.TotalCalls(sim.EndpointToken); n != 1 {
		t.Fatalf("%d logins, want 1", n)
	}
	// The operator fixes the file: the next call logs in with it.
	writeSecret(t, pwFile, []byte(sim.DefaultPassword+"\n"))
	if _, err := api.Tokens.Token(ctx); err != nil {
		t.Fatalf("after the password file was fixed: %v", err)
	}
}

func TestRefusedBackoffMaxSetting(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
		err   bool
	}{
		{"", tokensource.DefaultMaxRefusedBackoff, false},
		{"1m", time.Minute, false},
		{"-1s", 0, true},
	} {
		env := maps.Clone(creds)
		if tc.value != "" {
			env["LOYALTY_BRIDGE_API_AUTH_REFUSED_BACKOFF_MAX"] = tc.value
		}
		c, err := parse(t, nil, env)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), "--auth-refused-backoff-max") {
				t.Fatalf("%q: err %v", tc.value, err)
			}
			continue
		}
		if err != nil || c.API.RefusedBackoffMax != tc.want {
			t.Fatalf("%q: %v, err %v", tc.value, c.API.RefusedBackoffMax, err)
		}
	}
}
