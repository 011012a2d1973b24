package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// A password read from LOYALTY_BRIDGE_API_PASSWORD_FILE is read again
// before the next login: a rotated Kubernetes Secret heals the bridge
// without a restart. A secret given as a value is kept as it is.
func TestSecretFilesAreReadAgainAtLogin(t *testing.T) {
	srv := testkit.StartSim(t, testkit.SimOptions{Options: sim.Options{Members: 1}})
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "password")
	if err := os.WriteFile(pwFile, []byte(sim.DefaultPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
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
	first, err := api.Tokens.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The partner rotates the password and revokes every token; the
	// operator writes the new password into the Secret's file.
	srv.RotateCredentials(sim.CredentialRotation{Password: "rotated-password", RevokeTokens: true})
	if err := os.WriteFile(pwFile, []byte("rotated-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	api.Tokens.Invalidate(first) // as the client does on a 401
	next, err := api.Tokens.Token(ctx)
	if err != nil {
		t.Fatalf("login with the rotated password file: %v", err)
	}
	if next.AccessToken == first.AccessToken {
		t.Fatal("no new token")
	}
	// A missing file fails the grant without a secret in the error.
	if err := os.Remove(pwFile); err != nil {
		t.Fatal(err)
	}
	srv.RevokeTokens()
	api.Tokens.Invalidate(next)
	_, err = api.Tokens.Token(ctx)
	if err == nil || !strings.Contains(err.Error(), "LOYALTY_BRIDGE_API_PASSWORD_FILE") ||
		strings.Contains(err.Error(), "rotated-password") || strings.Contains(err.Error(), sim.DefaultClientSecret) {
		t.Fatalf("grant without the password file: %v", err)
	}
}
