// Package events defines the Go form of loyalty-bridge's event contracts: the
// input events of the three input topics, LoyaltyResult and LoyaltyError, and
// their enums. The Avro schemas in schemas/ are the source of truth; the
// structs here mirror them field for field (avro tags for internal/codec, json
// tags for the produce/tail CLI) and a test keeps the two in step.
//
// Validate checks an input event against the partner API's limits and the
// bridge's own rules after decoding and before any API call. It reports every
// field problem at once, naming fields, never echoing values: several fields
// hold personal data, and a validation message ends up in error events and
// logs. MemberOnboardRequested, the only event with personal data, prints and
// logs itself redacted (fmt verbs, zap, slog); only JSON and Avro carry the
// data.
//
// PersonalFields is the one list of the fields that hold personal data, and
// Redacted the one marker put in their place; the bridge's error events and
// the logger (internal/telemetry) redact by them too.
//
// This package owns shapes and rules only: no Kafka, no registry, no HTTP.
package events
