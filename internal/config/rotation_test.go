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
	"flag"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
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
	srv := testkit.StartSim(t, testkit.SimOptions{Options: sim.Options{Members: 1}})
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
	if n := srv.TotalCalls(sim.EndpointToken); n != 1 {
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

// parseEnv parses args and env into a full configuration and validates
// the Kafka and registry sections.
func parseEnv(t *testing.T, args []string, env map[string]string) *Config {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, b := Define(fs)
	if err := b.Parse(args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(c.Kafka.Validate(), c.Registry.Validate()); err != nil {
		t.Fatal(err)
	}
	return c
}

// A SASL password from LOYALTY_BRIDGE_KAFKA_SASL_PASSWORD_FILE is read
// again at each connection: after the user's password is changed on the
// broker and in the file, a connection the client opens again
// authenticates with the new one, without a restart.
func TestKafkaSASLPasswordFileIsReadAtReconnect(t *testing.T) {
	k := testkit.StartKafka(t, testkit.KafkaOptions{Topics: []testkit.TopicSet{{Partitions: 1, Names: []string{"t"}}}, Fake: []kfake.Opt{kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin-pass"), kfake.Superuser("SCRAM-SHA-256", "bridge", "pass-1")}})
	cluster := k.Fake
	var auths atomic.Int64
	cluster.ControlKey(int16(kmsg.SASLAuthenticate), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		auths.Add(1)
		return nil, nil, false // observed, handled by the cluster
	})
	pwFile := filepath.Join(t.TempDir(), "sasl-password")
	writeSecret(t, pwFile, []byte("pass-1\n"))
	c := parseEnv(t, []string{"--brokers", strings.Join(cluster.ListenAddrs(), ","), "--kafka-sasl-mechanism", "SCRAM-SHA-256",
		"--kafka-sasl-username", "bridge"}, map[string]string{"LOYALTY_BRIDGE_KAFKA_SASL_PASSWORD_FILE": pwFile})
	opts, err := c.Kafka.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic("t"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("before")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The operator rotates the password on the brokers and in the file.
	admin, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pass"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	altered, err := kadm.NewClient(admin).AlterUserSCRAMs(ctx, nil,
		[]kadm.UpsertSCRAM{{User: "bridge", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pass-2"}})
	if err == nil {
		err = altered.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	writeSecret(t, pwFile, []byte("pass-2\n"))

	// The broker drops the producer's connection; the client opens a new
	// one, which must authenticate to deliver the record.
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		return nil, errors.New("connection dropped by the test"), true
	})
	before := auths.Load()
	produced := make(chan error, 1)
	go func() { produced <- cl.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr() }()
	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("produce after the rotation and a reconnect: %v", err)
		}
	case <-time.After(20 * time.Second):
		// The deferred Close fails the record, which ends the goroutine.
		t.Fatal("the record was not delivered after the rotation: the new connection did not authenticate")
	}
	if auths.Load() == before {
		t.Fatal("no new authentication: the connection was not made again")
	}
}

// A registry password from LOYALTY_BRIDGE_SCHEMA_REGISTRY_PASSWORD_FILE is
// taken from the file at each request: after a rotation, requests carry
// the new one.
func TestRegistryPasswordFileIsReadPerRequest(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	var accepted atomic.Value
	accepted.Store("pass-1")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != accepted.Load().(string) {
			http.Error(w, `{"error_code":401,"message":"not authorized"}`, http.StatusUnauthorized)
			return
		}
		reg.Handler().ServeHTTP(w, r)
	}))
	defer ts.Close()
	pwFile := filepath.Join(t.TempDir(), "registry-password")
	writeSecret(t, pwFile, []byte("pass-1\n"))
	c := parseEnv(t, []string{"--schema-registry-url", ts.URL, "--schema-registry-username", "u"},
		map[string]string{"LOYALTY_BRIDGE_SCHEMA_REGISTRY_PASSWORD_FILE": pwFile})
	cl, err := c.Registry.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cl.Subjects(ctx); err != nil {
		t.Fatal(err)
	}
	accepted.Store("pass-2")
	writeSecret(t, pwFile, []byte("pass-2\n"))
	if _, err := cl.Subjects(ctx); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	// A file that cannot be read again leaves the last good password.
	if err := os.Remove(pwFile); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Subjects(ctx); err != nil {
		t.Fatalf("with the file gone: %v", err)
	}
}
