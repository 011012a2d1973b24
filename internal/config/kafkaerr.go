package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ConnectError wraps err, a failure to reach the brokers with k's
// settings, with the brokers and, when the brokers' answer is one a
// setting gives, the flags to check. Brokers and franz-go tell a
// misconfiguration in ways an operator cannot map to a flag: Apache Kafka
// answers a missing or untrusted client certificate with the same TLS
// alert, "bad certificate", and kfake with "certificate required"; a TLS
// listener answers plaintext with a TLS alert (Apache Kafka) or hangs up
// (kfake).
func (k *Kafka) ConnectError(err error) error {
	if hint := k.connectHint(err); hint != "" {
		return fmt.Errorf("kafka brokers %s: %w (%s)", k.Brokers, err, hint)
	}
	return fmt.Errorf("kafka brokers %s: %w", k.Brokers, err)
}

func (k *Kafka) connectHint(err error) string {
	// franz-go's guesses exist only as text: ErrFirstReadEOF keeps its
	// kind unexported, and a TLS alert read as a response size is a plain
	// error.
	msg := err.Error()
	_, firstEOF := errors.AsType[*kgo.ErrFirstReadEOF](err)
	var remote *net.OpError
	refusedTLS := errors.As(err, &remote) && remote.Op == "remote error"
	switch {
	case !k.tlsOn() && (firstEOF && strings.Contains(msg, "is TLS missing?") ||
		strings.Contains(msg, "speaking to a tls endpoint")):
		return "the brokers expect TLS: set --kafka-tls, and --kafka-tls-ca-file for a private CA"
	case refusedTLS && k.TLSCertFile == "":
		return "the brokers refused the TLS handshake: if they require a client certificate, set --kafka-tls-cert-file and --kafka-tls-key-file"
	case refusedTLS:
		return "the brokers refused the TLS handshake: check that the client certificate in --kafka-tls-cert-file is current and issued by a CA they trust"
	case k.SASLMechanism != SASLNone && (errors.Is(err, io.EOF) || errors.Is(err, kerr.SaslAuthenticationFailed)):
		// A broker that refuses SASL credentials may just hang up.
		return "SASL authentication refused or cut off: check --kafka-sasl-mechanism, --kafka-sasl-username and --kafka-sasl-password"
	case k.SASLMechanism == SASLNone && firstEOF && strings.Contains(msg, "is SASL missing?"):
		return "if the brokers require SASL, set --kafka-sasl-mechanism, --kafka-sasl-username and --kafka-sasl-password"
	}
	return ""
}
