package service

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
)

// pki is a private CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type pki struct {
	caFile, clientCert, clientKey string
	caPool                        *x509.CertPool
	server                        tls.Certificate
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: ips,
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := &pki{caPool: x509.NewCertPool()}
	p.caPool.AddCert(ca)
	p.caFile = write("ca.pem", "CERTIFICATE", caDER)
	srvDER, srvKey := issue(2, "kafka", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	p.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliDER, cliKey := issue(3, "bridge", x509.ExtKeyUsageClientAuth, nil)
	p.clientCert = write("client.pem", "CERTIFICATE", cliDER)
	keyDER, _ := x509.MarshalECPrivateKey(cliKey)
	p.clientKey = write("client-key.pem", "EC PRIVATE KEY", keyDER)
	return p
}

func kafkaConfig(t *testing.T, brokers []string, mod func(*config.Config)) *config.Config {
	t.Helper()
	cfg := &config.Config{Brokers: strings.Join(brokers, ","), KafkaClientID: "loyalty-bridge",
		PurchaseTopic: codec.DefaultPurchaseTopic, RefundTopic: codec.DefaultRefundRedemptionTopic, MemberTopic: codec.DefaultMemberOnboardingTopic,
		StartupTimeout: 10 * time.Second, RegistryURL: "http://127.0.0.1:1", LogFormat: "json", LogLevel: "info"}
	mod(cfg)
	if err := cfg.ValidateKafka(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// roundTrip produces and consumes one record with cfg's Kafka options.
func roundTrip(t *testing.T, cfg *config.Config) {
	t.Helper()
	opts, err := cfg.KafkaOpts()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(codec.DefaultPurchaseTopic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: codec.DefaultPurchaseTopic, Value: []byte("secure")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("record not consumed")
		}
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		if fs.NumRecords() > 0 {
			return
		}
	}
}

// Kafka over TLS with a private CA and a client certificate, and SASL PLAIN
// and SCRAM-SHA-256/512, for real against kfake; wrong credentials and a
// wrong CA fail Connect promptly with an error that says so.
func TestKafkaTLSAndSASL(t *testing.T) {
	p := newPKI(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, codec.DefaultTopics().Inputs()...),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.caPool, ClientAuth: tls.RequireAndVerifyClientCert,
			MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plain-user", "plain-pass"),
		kfake.Superuser("SCRAM-SHA-256", "scram256-user", "scram256-pass"),
		kfake.Superuser("SCRAM-SHA-512", "scram512-user", "scram512-pass"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tlsOn := func(cfg *config.Config) {
		cfg.KafkaTLSCAFile, cfg.KafkaTLSCertFile, cfg.KafkaTLSKeyFile = p.caFile, p.clientCert, p.clientKey
	}
	for _, m := range []struct{ mech, user, pass string }{
		{"PLAIN", "plain-user", "plain-pass"},
		{"SCRAM-SHA-256", "scram256-user", "scram256-pass"},
		{"SCRAM-SHA-512", "scram512-user", "scram512-pass"},
	} {
		t.Run(m.mech, func(t *testing.T) {
			roundTrip(t, kafkaConfig(t, c.ListenAddrs(), func(cfg *config.Config) {
				tlsOn(cfg)
				cfg.SASLMechanism, cfg.SASLUsername, cfg.SASLPassword = m.mech, m.user, m.pass
			}))
		})
	}

	for name, tc := range map[string]struct {
		mod  func(*config.Config)
		want string
	}{
		"wrong password": {func(cfg *config.Config) {
			tlsOn(cfg)
			cfg.SASLMechanism, cfg.SASLUsername, cfg.SASLPassword = "SCRAM-SHA-256", "scram256-user", "wrong"
		}, "SASL"},
		"unknown CA": {func(cfg *config.Config) {
			tlsOn(cfg)
			cfg.KafkaTLSCAFile = ""
			cfg.KafkaTLS = true
			cfg.SASLMechanism, cfg.SASLUsername, cfg.SASLPassword = "PLAIN", "plain-user", "plain-pass"
		}, "certificate"},
		"no TLS": {func(cfg *config.Config) {
			cfg.SASLMechanism, cfg.SASLUsername, cfg.SASLPassword = "PLAIN", "plain-user", "plain-pass"
		}, "kafka"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := kafkaConfig(t, c.ListenAddrs(), tc.mod)
			start := time.Now()
			d, err := Connect(context.Background(), cfg, Options{Logger: zap.NewNop()})
			if err == nil {
				d.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "scram256-pass") || strings.Contains(err.Error(), "plain-pass") {
				t.Errorf("error carries a password: %v", err)
			}
			t.Logf("%s after %s: %v", name, time.Since(start).Round(time.Millisecond), err)
		})
	}
}
