package config

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// --api-max-response-bytes, from a flag, its variable or the YAML file,
// bounds the partner answers the built client reads: an answer of 2,000
// bytes is read under the default and malformed under a limit of 1,000.
// Out of range, Validate names the flag.
func TestAPIMaxResponseBytes(t *testing.T) {
	const answer = `{"statusCode":200,"message":"SUCCESS","data":{"loyaltyId":"LB1"}}`
	srv := testkit.StartSim(t, testkit.SimOptions{Options: sim.Options{Members: 1}, Front: func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if strings.Contains(r.URL.Path, "/user-profile/") {
			_, _ = io.WriteString(w, answer+strings.Repeat(" ", 2000-len(answer)))
			return
		}
		next.ServeHTTP(w, r)
	}})
	yml := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(yml, []byte("api-max-response-bytes: 1000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"LOYALTY_BRIDGE_API_BASE_URL": srv.URL, "LOYALTY_BRIDGE_API_CLIENT_ID": sim.DefaultClientID,
		"LOYALTY_BRIDGE_API_CLIENT_SECRET": sim.DefaultClientSecret, "LOYALTY_BRIDGE_API_USERNAME": sim.DefaultUsername,
		"LOYALTY_BRIDGE_API_PASSWORD": sim.DefaultPassword}
	for _, c := range []struct {
		name    string
		args    []string
		env     string
		limited bool
	}{
		{"default", nil, "", false},
		{"flag", []string{"--api-max-response-bytes", "1000"}, "", true},
		{"variable", nil, "1000", true},
		{"yaml", []string{"--config", yml}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			if c.env != "" {
				env["LOYALTY_BRIDGE_API_MAX_RESPONSE_BYTES"] = c.env
			}
			cfg, err := parse(t, c.args, env)
			if err != nil {
				t.Fatal(err)
			}
			api, err := cfg.API.Build(BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer api.Close()
			_, _, err = api.Client.CustomerInfo(context.Background(), "LB1")
			if limited := errors.Is(err, loyalty.ErrResponseTooLarge); limited != c.limited || (!c.limited && err != nil) {
				t.Fatalf("limited %v, want %v: %v", limited, c.limited, err)
			}
		})
	}
	for _, bad := range []string{"0", "-1", "1048577"} {
		_, err := parse(t, []string{"--api-max-response-bytes", bad}, base)
		if err == nil || !strings.Contains(err.Error(), "--api-max-response-bytes "+bad) {
			t.Errorf("--api-max-response-bytes %s: %v", bad, err)
		}
	}
}
