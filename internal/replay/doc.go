// Package replay re-runs input records through the bridge after the fact:
// a partition's offset range, a time window, or the originals carried by
// error events ("reprocess what failed").
//
// # Model
//
// A replay never touches the live consumer group: it reads with a client of
// its own by explicit partition offsets, joins no group and commits
// nothing, so the live bridges neither rebalance nor lose their place. It
// runs the bridge's handler in replay mode (service.Deps.Bridge(true)):
// every accrual and redemption is looked up before it is written, so one
// that was applied comes back ALREADY_APPLIED and nothing is granted twice;
// link and unlink are harmless to repeat by design. Onboarding has no
// idempotency key: the bridge reports an onboarding that may have been
// applied as TRANSIENT_EXHAUSTED for an operator to check before replaying
// it (the spec calls externalId unique; the simulator refuses a second
// enrolment of one). Outputs go to the same reply topics as live ones,
// with the header replayed: true.
//
// A replay is planned when it starts: ranges end at each partition's last
// stable offset at that moment (records produced later are the live
// bridge's business, and a replay from an error topic does not chase the
// error events it writes itself). Records are read as they are needed, at
// most Options.MaxBuffered ahead of the handler, committed records only;
// each partition's records are scheduled with package ordering as the live
// pipeline does (by default one key's records one at a time in offset
// order, different keys concurrently), up to MaxInFlight at once, started
// at no more than Rate per second so that a replay does not starve live
// traffic of the partner API. A record counts as done when Kafka has
// acknowledged its output.
//
// From error events, each original record is replayed once however many
// error events name it, in source offset order. An event without its
// original (a PII-strict deployment) is replayed from its source position
// while the source topic still retains it, and reported as not replayable
// otherwise. By default only retryable error events are chosen
// (TRANSIENT_EXHAUSTED, AUTH, transient INTERNAL): replaying a DECODE or
// VALIDATION failure gives the same failure unless the bridge changed.
//
// A dry run decodes and validates each record and says what would be
// called, calling nothing and producing nothing.
//
// The Summary counts records by outcome and says what still needs
// attention: records not replayable, records whose replay ended in a
// retryable error again, and a replay that was interrupted.
//
// # What it does not own
//
// The package holds no business rules (package bridge decides calls and
// outcomes), never writes to a consumer group, and never creates topics.
package replay
