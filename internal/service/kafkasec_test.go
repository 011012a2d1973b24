package service

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
)

// pki is a private CA with a server certificate and a client certificate,
// written as PEM files.
type pki struct {
	caFile, clientCert, clientKey string
	caPool                        *x509.CertPool
	server                        tls.Certificate
}

// newPKI makes a CA whose server certificate names dnsNames, or 127.0.0.1
// when there are none.
func newPKI(t *testing.T, dnsNames ...string) *pki {
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
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP, names []string) ([]byte, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: ips, DNSNames: names,
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
	var ips []net.IP
	if len(dnsNames) == 0 {
		ips = []net.IP{net.ParseIP("127.0.0.1")}
	}
	srvDER, srvKey := issue(2, "kafka", x509.ExtKeyUsageServerAuth, ips, dnsNames)
	p.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliDER, cliKey := issue(3, "bridge", x509.ExtKeyUsageClientAuth, nil, nil)
	p.clientCert = write("client.pem", "CERTIFICATE", cliDER)
	keyDER, _ := x509.MarshalECPrivateKey(cliKey)
	p.clientKey = write("client-key.pem", "EC PRIVATE KEY", keyDER)
	return p
}

func kafkaConfig(t *testing.T, brokers []string, mod func(*config.Config)) *config.Config {
	t.Helper()
	cfg := &config.Config{Kafka: config.Kafka{Brokers: strings.Join(brokers, ","), ClientID: "loyalty-bridge", Compression: config.CompressNone},
		Topics: config.Topics{Purchase: codec.DefaultPurchaseTopic, RefundRedemption: codec.DefaultRefundRedemptionTopic,
			MemberOnboarding: codec.DefaultMemberOnboardingTopic},
		Ops: config.Ops{StartupTimeout: 10 * time.Second, LogFormat: "json", LogLevel: "info"}, Registry: config.Registry{URL: "http://127.0.0.1:1"}}
	mod(cfg)
	if err := cfg.Kafka.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// roundTrip produces and consumes one record with cfg's Kafka options, then
// runs Connect's start-up checks (brokers, input topics, the registry)
// with them.
func roundTrip(t *testing.T, cfg *config.Config) {
	t.Helper()
	opts, err := cfg.Kafka.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topic := codec.DefaultPurchaseTopic
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value := fmt.Sprintf("secure %s", t.Name())
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for got := false; !got; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("record not consumed")
		}
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = got || string(r.Value) == value })
	}

	reg := srfake.New()
	defer reg.Close()
	cfg.Registry.URL, cfg.RegisterSchemas = reg.URL(), true
	d, err := Connect(ctx, cfg, Options{Logger: zap.NewNop(), NoAPI: true})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	d.Close()
}

// refusesLikeKafka makes the broker answer SASL authentication of user the
// way Apache Kafka does (SASL_AUTHENTICATION_FAILED with a message), where
// kfake itself hangs up.
func refusesLikeKafka(c *kfake.Cluster, user string) {
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.SASLAuthenticateRequest)
		if !bytes.Contains(req.SASLAuthBytes, []byte(user)) {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
		resp.ErrorMessage = &msg
		return resp, nil, true
	})
}

// Kafka over TLS with a private CA (with and without a client certificate,
// with --kafka-tls-server-name) and SASL PLAIN and SCRAM-SHA-256/512, for
// real against kfake; wrong credentials, a wrong or missing CA, a missing
// client certificate and a missing TLS or SASL setting fail Connect
// promptly (well within --startup-timeout, not a deadline) with an error
// that says which.
func TestKafkaTLSAndSASL(t *testing.T) {
	p := newPKI(t)
	mutual, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, codec.DefaultTopics().Inputs()...),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.caPool, ClientAuth: tls.RequireAndVerifyClientCert,
			MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plain-user", "plain-pass"),
		kfake.Superuser("SCRAM-SHA-256", "scram256-user", "scram256-pass"),
		kfake.Superuser("SCRAM-SHA-512", "scram512-user", "scram512-pass"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mutual.Close)
	refusesLikeKafka(mutual, "refused-user")
	// A broker known by a DNS name only, TLS without client certificates
	// and without SASL.
	named := newPKI(t, "kafka.internal")
	serverOnly, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, codec.DefaultTopics().Inputs()...),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{named.server}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(serverOnly.Close)

	tlsOn := func(cfg *config.Config) {
		cfg.Kafka.TLSCAFile, cfg.Kafka.TLSCertFile, cfg.Kafka.TLSKeyFile = p.caFile, p.clientCert, p.clientKey
	}
	sasl := func(mech, user, pass string) func(*config.Config) {
		return func(cfg *config.Config) {
			cfg.Kafka.SASLMechanism, cfg.Kafka.SASLUsername, cfg.Kafka.SASLPassword = config.SASLMechanism(mech), user, pass
		}
	}
	both := func(mods ...func(*config.Config)) func(*config.Config) {
		return func(cfg *config.Config) {
			for _, m := range mods {
				m(cfg)
			}
		}
	}

	for _, m := range []struct{ mech, user, pass string }{
		{"PLAIN", "plain-user", "plain-pass"},
		{"SCRAM-SHA-256", "scram256-user", "scram256-pass"},
		{"SCRAM-SHA-512", "scram512-user", "scram512-pass"},
	} {
		t.Run("client certificate and "+m.mech, func(t *testing.T) {
			roundTrip(t, kafkaConfig(t, mutual.ListenAddrs(), both(tlsOn, sasl(m.mech, m.user, m.pass))))
		})
	}
	t.Run("private CA and server name", func(t *testing.T) {
		roundTrip(t, kafkaConfig(t, serverOnly.ListenAddrs(), func(cfg *config.Config) {
			cfg.Kafka.TLSCAFile, cfg.Kafka.TLSServerName = named.caFile, "kafka.internal"
		}))
	})

	other := newPKI(t)
	for _, tc := range []struct {
		name    string
		brokers []string
		mod     func(*config.Config)
		want    []string
	}{
		{"wrong SCRAM password", mutual.ListenAddrs(), both(tlsOn, sasl("SCRAM-SHA-256", "scram256-user", "wrong-pass")),
			[]string{"SASL", "--kafka-sasl-password"}},
		{"unknown SCRAM user", mutual.ListenAddrs(), both(tlsOn, sasl("SCRAM-SHA-512", "nobody", "wrong-pass")),
			[]string{"SASL", "--kafka-sasl-username"}},
		{"wrong PLAIN password", mutual.ListenAddrs(), both(tlsOn, sasl("PLAIN", "plain-user", "wrong-pass")),
			[]string{"SASL"}},
		{"credentials for another mechanism", mutual.ListenAddrs(), both(tlsOn, sasl("SCRAM-SHA-512", "scram256-user", "scram256-pass")),
			[]string{"SASL", "--kafka-sasl-mechanism"}},
		{"refused as Apache Kafka refuses", mutual.ListenAddrs(), both(tlsOn, sasl("SCRAM-SHA-256", "refused-user", "wrong-pass")),
			[]string{"SASL_AUTHENTICATION_FAILED", "invalid credentials"}},
		{"SASL missing", mutual.ListenAddrs(), tlsOn,
			[]string{"SASL is required but not provided"}},
		{"client certificate missing", mutual.ListenAddrs(), both(sasl("PLAIN", "plain-user", "plain-pass"),
			func(cfg *config.Config) { cfg.Kafka.TLSCAFile = p.caFile }),
			[]string{"certificate required"}},
		{"another private CA", mutual.ListenAddrs(), both(tlsOn, sasl("PLAIN", "plain-user", "plain-pass"),
			func(cfg *config.Config) { cfg.Kafka.TLSCAFile = other.caFile }),
			[]string{"certificate signed by unknown authority"}},
		{"system roots for a private CA", mutual.ListenAddrs(), both(tlsOn, sasl("PLAIN", "plain-user", "plain-pass"),
			func(cfg *config.Config) { cfg.Kafka.TLSCAFile, cfg.Kafka.TLS = "", true }),
			[]string{"certificate signed by unknown authority"}},
		{"server name missing", serverOnly.ListenAddrs(), func(cfg *config.Config) { cfg.Kafka.TLSCAFile = named.caFile },
			[]string{"cannot validate certificate for 127.0.0.1"}},
		{"wrong server name", serverOnly.ListenAddrs(), func(cfg *config.Config) {
			cfg.Kafka.TLSCAFile, cfg.Kafka.TLSServerName = named.caFile, "kafka.example"
		}, []string{"certificate is valid for kafka.internal, not kafka.example"}},
		{"TLS missing", mutual.ListenAddrs(), sasl("PLAIN", "plain-user", "plain-pass"),
			[]string{"is TLS missing?"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // kfake hangs up on refused credentials; franz-go retries that for a second or two
			cfg := kafkaConfig(t, tc.brokers, tc.mod)
			start := time.Now()
			d, err := Connect(context.Background(), cfg, Options{Logger: zap.NewNop()})
			took := time.Since(start)
			if err == nil {
				d.Close()
				t.Fatal("connected")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if errors.Is(err, context.DeadlineExceeded) || took >= cfg.Ops.StartupTimeout {
				t.Errorf("took %v (startup timeout %v): %v", took, cfg.Ops.StartupTimeout, err)
			}
			for _, secret := range []string{"wrong-pass", "plain-pass", "scram256-pass"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error carries a password: %v", err)
				}
			}
			t.Logf("after %s: %v", took.Round(time.Millisecond), err)
		})
	}
}
