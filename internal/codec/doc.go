// Package codec turns Kafka record values into events and back: Avro in the
// Confluent wire format (magic byte 0, 4-byte big-endian schema id, Avro
// binary), with subjects named by TopicNameStrategy (<topic>-value) in a
// Schema Registry.
//
// The model: New runs once at start-up. It parses the schemas embedded by
// package schemas (the bridge's reader and writer schemas), registers them or
// looks them up for every configured topic, and remembers each topic's schema
// id. After that the per-record path makes no registry call and parses no
// schema:
//
//   - Encode, EncodeResult and EncodeError write with the ids resolved by New.
//   - Decode reads the writer's schema id from the record, fetches that
//     schema from the registry the first time the id is seen (one request per
//     id however many goroutines ask; a fetch failure is not cached, an id the
//     registry does not know is), and resolves the writer schema against the
//     bridge's reader schema with Avro schema resolution once per (writer id,
//     topic contract). Upstream may therefore add optional fields, or lag a
//     version behind, without the bridge noticing.
//
// Top-level unions (the refund-redemption and member-onboarding topics) are
// resolved branch by branch: a writer that adds a branch the bridge does not
// know can still send the branches it does; a record of the unknown branch
// fails alone with DecodeKind UNKNOWN_BRANCH.
//
// Decode never panics and never returns a half-read record: an empty body,
// a truncated body and trailing bytes after the record are *DecodeError
// values (hamba/avro's Unmarshal would accept all three). Every *DecodeError
// is permanent for that record (the bridge writes a DECODE error event); any
// other error from Decode (registry unreachable, context ended) is transient
// and the record should be retried.
//
// For operators (loyalty-bridge schemas), Register registers the bridge's
// schemas under every subject of a set of topics, and Check says, subject by
// subject, why the bridge's schema could not be registered as the next
// version under the subject's compatibility level.
//
// codec knows the event shapes (package events) and the wire format; it does
// not know Kafka clients, the partner API or what the bridge does with events.
package codec
