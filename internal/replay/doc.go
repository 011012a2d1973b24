// Package replay re-runs input records through the bridge after the fact:
// a partition's offset range, a time window, or the originals carried by
// error events ("reprocess what failed").
//
// A replay never touches the live consumer group: it reads with its own
// client by explicit partition offsets, joins no group and commits nothing.
// It uses the bridge's handler in replay mode, so every accrual and
// redemption is looked up before it is written (an applied one comes back
// ALREADY_APPLIED, nothing is granted twice) and every output carries the
// header replayed: true; outputs go to the same reply topics as live ones.
// Records of one key are handled in offset order; different keys run
// concurrently up to MaxInFlight, paced by Rate so a replay does not starve
// live traffic.
//
// From error events, each original record is replayed once however many
// error events name it. An event without its original (a PII-strict
// deployment) is replayed from its source coordinates while the source
// topic still retains them, and reported as not replayable otherwise. By
// default only retryable error events are chosen (TRANSIENT_EXHAUSTED,
// AUTH, INTERNAL): replaying a DECODE or VALIDATION failure gives the same
// failure.
//
// A dry run decodes and validates and prints what would be called, calling
// nothing.
package replay
