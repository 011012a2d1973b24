package codec

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/sr"
)

// DecodeKind classifies a record that can never be decoded. Its string is
// what the bridge puts in LoyaltyError.reason.
type DecodeKind string

// Decode failure kinds.
const (
	KindEmpty           DecodeKind = "EMPTY"             // no value, or a header with no body
	KindWrongMagic      DecodeKind = "WRONG_MAGIC"       // first byte is not the Confluent magic byte 0
	KindUnknownSchemaID DecodeKind = "UNKNOWN_SCHEMA_ID" // the registry does not know the id
	KindTruncated       DecodeKind = "TRUNCATED"         // the body ends inside the record
	KindTrailingBytes   DecodeKind = "TRAILING_BYTES"    // bytes left after the record
	KindUnknownBranch   DecodeKind = "UNKNOWN_BRANCH"    // a record type (or union index) this topic's contract lacks
	KindWrongTopic      DecodeKind = "WRONG_TOPIC"       // one of our event types, but of another topic
	KindIncompatible    DecodeKind = "INCOMPATIBLE"      // writer schema cannot be resolved into ours
	KindMalformed       DecodeKind = "MALFORMED"         // the body is not valid Avro for the writer schema
	KindTooLarge        DecodeKind = "TOO_LARGE"         // the value exceeds Options.MaxValueBytes
)

// DecodeError is a permanent failure to decode one record. Detail never
// contains record content.
type DecodeError struct {
	Kind     DecodeKind `json:"kind"`
	Topic    string     `json:"topic"`
	SchemaID int        `json:"schemaId,omitempty"` // 0 when not read
	Detail   string     `json:"detail,omitempty"`
}

func (e *DecodeError) Error() string {
	s := fmt.Sprintf("decode %s: %s", e.Topic, e.Kind)
	if e.SchemaID != 0 {
		s += fmt.Sprintf(" (schema id %d)", e.SchemaID)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// ErrUnknownTopic is returned (wrapped) for a topic the codec was not
// configured with: a programming or configuration error, not bad data.
var ErrUnknownTopic = errors.New("codec: topic not configured")

// ErrRegistry wraps a failure to reach the Schema Registry or an unexpected
// answer from it. It is transient: retry the record later.
var ErrRegistry = errors.New("schema registry")

// ErrRefused wraps the registry's refusal to register one of the bridge's
// schemas because the subject's compatibility level forbids it: not a
// failure to retry, but a contract to settle with whoever registered the
// subject's other versions.
var ErrRefused = errors.New("the registry refuses the bridge's schema as incompatible with the subject's versions (loyalty-bridge schemas check names the fields)")

// refused returns err wrapped in ErrRefused when it is the registry's
// incompatible-schema answer (HTTP and error code 409, from Confluent's
// registry and Apicurio's alike), and nil otherwise.
func refused(err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) && re.ErrorCode == sr.ErrIncompatibleSchema.Code {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return nil
}
