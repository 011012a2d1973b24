// Package replay re-runs input records through the bridge after the fact:
// a partition's offset range, a time window, or the records named by error
// events ("reprocess what failed").
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
// From error events, each source record named is replayed once however
// many error events name it, in source offset order. By default only
// retryable error events are chosen (TRANSIENT_EXHAUSTED, AUTH, transient
// INTERNAL): replaying a DECODE or VALIDATION failure gives the same
// failure unless the bridge changed.
//
// # Error events are claims
//
// An error event says "the record at this source position failed"; it may
// also carry that record (originalKey/originalValue, with the bridge's
// --include-original). Anyone who can write an error topic can write such
// a claim, and a replay sends what it replays to the partner: taking the
// carried record at its word would let a writer of the error topic have
// any accrual made. So a replay from error events trusts the input topics,
// which it reads, and not the error events, which only point:
//
//   - The record replayed is the one read at the error event's source
//     position, from the input topic whose error topic is being read
//     (Options.Inputs). An error event naming any other topic, or a
//     position that topic does not have (no such partition, an offset
//     past its end), is refused without reading anything.
//   - A carried original is compared with the source record (key and value
//     bytes, by SHA-256 digest). If any error event naming a record carries
//     an original that differs, neither the source record nor the original
//     is replayed: the error topic has a writer other than the bridge (or
//     the input topic was recreated under it), which is for a person to
//     look at, not for a replay to guess. It is counted, and a line names
//     the error event's position and the source position, nothing else.
//   - The carried original is a fallback for a record the source no longer
//     holds (retention deleted it, compaction removed it), and only with
//     Options.TrustErrorOriginals (`--trust-error-originals`). The default
//     is off because the check above cannot protect this case: a forged
//     error event can name an offset below the log start, where there is
//     nothing to compare with. Such records are counted as "source gone".
//     An operator who sets the option asserts what the replay cannot
//     check, that nobody but the bridge writes the error topic (its ACLs);
//     even then, error events that disagree about one record are a
//     mismatch, not a choice.
//
// What a forged error event can still do is have a real input record
// replayed, as `replay --topic` could: the guard answers an applied
// accrual or redemption ALREADY_APPLIED (onboarding, which has no
// idempotency key, is the exception docs/operating.md describes). The guard does
// not make a carried original harmless: it stops an accrual from being
// applied twice under one transactionId, not one made up under a new one.
//
// A dry run decodes and validates each record and says what would be
// called, calling nothing and producing nothing.
//
// # While the partner is still failing
//
// The bridge's handlers hold a record while the circuit is open or the
// credentials are refused, so a replay against a partner that is still
// down would wait for ever and say nothing. Progress is therefore reported
// on a schedule (Options.Tick, 2 s) as well as per record, with what the
// records wait for (Options.WaitingFor: the circuit open since when, the
// credentials refused, calls waiting out a Retry-After). A batch replay
// can give up: Options.MaxWait when no record finished for that long,
// Options.FailFast at the first sign the partner still fails. Giving up
// abandons the records in flight (a later replay guards them like every
// record) and is reported in Summary.GaveUp: replay later.
//
// # Requests
//
// Request is the replay command's flags, checked before anything
// connects; Replayer.Replay plans and runs one. A request that cannot
// match what Kafka holds (a --since in the future or after the topic's
// last record, an offset past a partition's end) is a *RequestError that
// names the flag and says what the topic holds, so that a mistyped year
// fails instead of replaying nothing successfully.
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
