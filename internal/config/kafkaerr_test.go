package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// remoteAlert is the error crypto/tls returns for an alert the peer sent.
type remoteAlert string

func (a remoteAlert) Error() string { return string(a) }

// The hints of ConnectError for the errors that can be made here;
// TestKafkaTLSAndSASL in internal/service gets the rest from kfake and
// Apache Kafka.
func TestConnectError(t *testing.T) {
	refused := fmt.Errorf("wrapped: %w", &net.OpError{Op: "remote error", Err: remoteAlert("tls: bad certificate")})
	for _, tc := range []struct {
		name string
		k    Kafka
		err  error
		want string // "": no hint
	}{
		{"client certificate refused", Kafka{TLSCAFile: "ca.pem", TLSCertFile: "c.pem", TLSKeyFile: "k.pem"}, refused,
			"--kafka-tls-cert-file is current and issued by a CA they trust"},
		{"no client certificate", Kafka{TLS: true}, refused, "set --kafka-tls-cert-file and --kafka-tls-key-file"},
		{"SASL refused", Kafka{SASLMechanism: SASLScramSHA256}, kerr.SaslAuthenticationFailed, "check --kafka-sasl-mechanism"},
		{"SASL hung up", Kafka{SASLMechanism: SASLPlain}, io.EOF, "check --kafka-sasl-mechanism"},
		{"TLS alert read as a size", Kafka{}, errors.New("invalid large response size 352518912 > limit 104857600; the first three bytes received " +
			"appear to be a tls alert record for TLS v1.2; is this a plaintext connection speaking to a tls endpoint?"), "set --kafka-tls,"},
		{"TLS alert with TLS on", Kafka{TLS: true}, errors.New("is this a plaintext connection speaking to a tls endpoint?"), ""},
		{"hang-up without SASL", Kafka{}, io.EOF, ""},
		{"hang-up after the dial", Kafka{}, &kgo.ErrFirstReadEOF{}, ""},
		{"refused connection", Kafka{SASLMechanism: SASLPlain, TLS: true}, &net.OpError{Op: "dial", Err: errors.New("connection refused")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.k.Brokers = "b:9093"
			err := tc.k.ConnectError(tc.err)
			if !errors.Is(err, tc.err) || !strings.HasPrefix(err.Error(), "kafka brokers b:9093: ") {
				t.Errorf("ConnectError = %v: does not wrap %v with the brokers", err, tc.err)
			}
			bare := err.Error() == "kafka brokers b:9093: "+tc.err.Error()
			if tc.want == "" && !bare || tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ConnectError = %v, want a hint saying %q", err, tc.want)
			}
		})
	}
}
