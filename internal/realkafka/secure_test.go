package realkafka_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
)

func TestLoadSecure(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw := write("passwords.env", "KAFKA_PLAIN_PASSWORD=p1\nKAFKA_SCRAM_SHA_256_PASSWORD=p2\nKAFKA_SCRAM_SHA_512_PASSWORD=p3\n")
	full := "# comment\n\nKAFKA_PLAINTEXT=127.0.0.1:1,127.0.0.1:2\nKAFKA_SSL=127.0.0.1:11\nKAFKA_SASL_SSL=127.0.0.1:21\n" +
		"KAFKA_SASL_PLAINTEXT=127.0.0.1:31\nKAFKA_SSL_NAMED=127.0.0.1:41\nKAFKA_SSL_NAMED_SERVER_NAME=kafka.internal\n" +
		"KAFKA_CA_FILE=/ca.pem\nKAFKA_CLIENT_CERT_FILE=/client.pem\nKAFKA_CLIENT_KEY_FILE=/client-key.pem\n" +
		"KAFKA_PLAIN_USER=u1\nKAFKA_SCRAM_SHA_256_USER=u2\nKAFKA_SCRAM_SHA_512_USER=u3\nKAFKA_PASSWORDS_FILE=" + pw + "\n"

	s, err := realkafka.LoadSecure(write("secure.env", full))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Plaintext, "|"); got != "127.0.0.1:1|127.0.0.1:2" {
		t.Errorf("Plaintext = %q", got)
	}
	if s.SASLSSL[0] != "127.0.0.1:21" || s.SSLNamed[0] != "127.0.0.1:41" || s.SSLNamedServerName != "kafka.internal" || s.ClientKeyFile != "/client-key.pem" {
		t.Errorf("LoadSecure = %+v", s)
	}
	if c := s.Users["SCRAM-SHA-512"]; c != (realkafka.Credential{User: "u3", Password: "p3"}) {
		t.Errorf("SCRAM-SHA-512 user = %+v", c)
	}

	cut := strings.NewReplacer("KAFKA_SSL=127.0.0.1:11\n", "", "KAFKA_PLAIN_USER=u1\n", "").Replace(full)
	_, err = realkafka.LoadSecure(write("cut.env", cut))
	for _, want := range []string{"no KAFKA_SSL\n", "no KAFKA_PLAIN_USER"} {
		if err == nil || !strings.Contains(err.Error()+"\n", want) {
			t.Errorf("without two settings: %v, want it to say %q", err, want)
		}
	}

	write("passwords.env", "KAFKA_PLAIN_PASSWORD=p1\nsecret-without-key\n")
	_, err = realkafka.LoadSecure(filepath.Join(dir, "secure.env"))
	if err == nil || !strings.Contains(err.Error(), "passwords.env:2: not KEY=VALUE") || strings.Contains(err.Error(), "secret") {
		t.Errorf("a bad passwords line: %v", err)
	}
}

func TestSecureClusterSkipsWithoutFile(t *testing.T) {
	t.Setenv(realkafka.EnvSecure, "")
	ran := false
	t.Run("inner", func(t *testing.T) {
		realkafka.SecureCluster(t)
		ran = true
	})
	if ran {
		t.Fatal("SecureCluster did not skip with no file named")
	}
}
