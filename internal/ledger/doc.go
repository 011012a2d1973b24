// Package ledger is the bridge's own durable memory of the partner writes
// it has sent: for every accrual, redemption and refund clawback, an
// intent (written, and acknowledged by Kafka, before the write is sent)
// and, once the record has its answer, the settled outcome. Consumer-group
// offsets are not the bridge's to keep: operators reset them, brokers
// expire them, tools commit without the dispatch horizon, and producers
// send one event twice at later offsets. The ledger stands apart from
// them, so none of that can erase it.
//
// # Shape
//
// A compacted Kafka topic (by default <group>.ledger, cleanup.policy
// compact,delete, retention.ms the dedup window), co-partitioned with the
// inputs: the entries of input partition p go to ledger partition p, keyed
// by kind and transactionId (a/<id>, r/<id>, f/<id> for accruals,
// redemptions and refunds), so compaction keeps the latest state of each.
// Each process keeps, for every input partition it handles, the entries of
// its ledger partition, read from the topic when the partition is
// assigned, before its first record is answered, and added to as it
// writes. The topic is the changelog and the truth; what the process
// keeps is a copy (Kafka Streams' shape), in one of two stores behind one
// interface (backend), sharing the restore and lookup code:
//
//   - in memory (the default): the record values in byte chunks mapped
//     outside the Go heap, found by a hash index of uint64 slots (nothing
//     per entry for the garbage collector to mark, and no entry bytes in
//     its heap goal; arena.go), read from the log start on the first
//     assignment, caught up when the partition is assigned again, read
//     again from the start once Forget dropped it;
//   - on disk (Options.Dir): one Pebble DB for the process, each input
//     partition under a key prefix, with a checkpoint (the next ledger
//     offset read, the earliest entry's time, the ledger topic's id)
//     written in the same batch as the entries it covers, so a restart, a
//     rebalance or a Forget reads only what was written since. A
//     checkpoint below the log start reads from the log start (retention
//     deleted only entries past the window); one past the partition's end,
//     or of another topic id (the topic deleted and created again), wipes
//     the partition and reads from the start; a store that does not open
//     is wiped whole and read again. Entries past the window are deleted
//     by a background sweep, chunk by chunk, never under a lookup's lock.
//
// An exactly-once round carries its settled entries in its transaction;
// one that aborts after its writes were answered has them written again
// outside it (WriteSettled), since an entry records a partner answer
// whatever the round became, and a restore reads committed entries only.
//
// The put rule is the same in both: a key keeps its last settled value, or
// its last value when none is settled, so a late-read intent never hides
// its settled outcome (on disk, a merge operator: a write needs no read).
//
// From a partition's restore on, a tail (one client for all the
// partitions read; a partition is dropped from it by Forget, and Close
// stops it) keeps reading, read_uncommitted, what other writers add.
//
// Every entry names its writer in a record header (w: 8 random bytes made
// by New, once per process; 11 bytes on the wire, nothing in memory). An
// entry without one (written before writers were named) is another
// writer's.
//
// # What an entry tells the bridge
//
//   - settled applied: the transaction was applied; a later record with
//     the same transactionId (a producer's duplicate at any offset, a
//     redone record after an offsets reset, a replay) is answered from the
//     entry, ALREADY_APPLIED, without a partner call;
//   - intent without a settled outcome: a write may have been sent; the
//     record is guarded (a lookup at the partner, once the apply window
//     has passed since the intent's sending), and a refund's intent names
//     the clawback slot it wrote, so its own slot is known exactly;
//   - no entry: the ledger adds nothing, and the bridge's other rules
//     (Fresh, replayed, an ambiguous attempt) decide.
//
// Entries older than the window are forgotten (Kafka deletes them by
// retention.ms, the process by the entry's time), so a duplicate arriving
// later than the window after its first copy is not recognised here.
//
// # Log order decides
//
// Reading an entry and then writing an intent is check-then-act: two
// processes (the live bridge and a replay over the same records, or a
// member and one the group has not yet stopped) can both find no entry
// and both intend. So an intent is not the end of the check. A record
// watches its transaction from when it consults the ledger (Watch: the
// entry then, and every entry other writers make after it); after its
// intent is acknowledged at ledger offset O, the process reads the
// partition up to O (Heed) and looks at what other writers wrote about
// the transaction below O that the record has not heeded yet:
//
//   - a settled entry: the transaction has its answer; the record is
//     answered from it, nothing sent;
//   - an intent: its write may be under way. Nothing is sent now; the
//     record looks the transaction up once that write has landed or never
//     will (the intent's At + SendWithin + the call timeout + the apply
//     window), and if it was not applied, intends again, which is checked
//     the same way; an intent heeded once is not waited on again;
//   - nothing: the write is sent, if the intent is younger than
//     SendWithin (else nothing is sent, and the record intends again).
//     The partner client enforces it at the last moment before each
//     attempt leaves (loyalty.WithSendBy, Watch.SendBy): a write whose
//     gate or call slot waited past it, or a retry after an answer known
//     not to be applied, is not sent on that intent, and the record
//     intends again.
//
// Why it is sound. Take two sends of one transaction by two processes A
// and B, each after its intent, I_A at offset O_A before I_B at O_B. A
// sent by I_A.At + SendWithin, so its write lands by I_A.At + SendWithin
// + call timeout + apply window, or never (assumption 1 of
// docs/guarantees.md). B read everything below O_B before sending. I_A was either
// in B's memory when B consulted the ledger (below the watch's start):
// then the entry B found was I_A or one written after it (memory takes
// entries in log order: the restore and the tail put them, B's own
// intents included; only B's own settled entries go in when made, and they
// answer); settled, B was
// answered from it; an intent (later in the log, so no earlier in time, the
// writers' clocks agreeing well within the window), B's record was guarded
// and looked the transaction up no sooner than that intent's At plus the
// same bound. Or B's watch read I_A: B's heed of O_B, or of an earlier
// intent of B's, returned it, B sent nothing on it, and looked up no
// sooner than I_A.At plus the bound. Either way B's lookup ran once A's
// write had landed or never would, and finds it if it landed (assumption
// 2): B answers ALREADY_APPLIED and does not send. So of two sends by
// different processes the later-intended one never happens while the
// earlier can still take effect: one effect. A process's own repeats are
// guarded by the bridge's other rules (an ambiguous answer, Fresh).
//
// Cost: one fetch round trip between a write's intent and its sending
// (the tail answers as soon as the intent is in the log; measured in the
// docs/guarantees.md), and reading back the process's own entries (its settled ones
// compared, not copied).
//
// Liveness is not promised in theory: two processes whose writes are
// never applied can each find the other's newer intent below their own,
// round after round. Each round costs a lookup and the bound above; the
// bridge spends no attempt of the record's budget on the first few
// (bridge.maxHeeds), then ends the record as a retryable error event,
// nothing written twice.
//
// # Assumptions
//
//   - A duplicate carries its first copy's key (a producer's retry does),
//     so it lands in the same input partition; the input topics' partition
//     counts do not change within the window.
//   - The writers' clocks agree well within the apply window (an intent's
//     At is its writer's).
//   - Processes that may send one transaction share the ledger topic: the
//     live bridge and a replay with the same --ledger-topic. A process
//     without the ledger is not ordered with the others.
//
// The package holds no partner client and decides nothing about calls: the
// bridge asks it and tells it (internal/bridge).
package ledger
