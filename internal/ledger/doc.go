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
//   - in memory (the default): a map of the record values, read from the
//     log start on the first assignment, caught up when the partition is
//     assigned again, read again from the start once Forget dropped it;
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
// The put rule is the same in both: a key keeps its last settled value, or
// its last value when none is settled, so a late-read intent never hides
// its settled outcome (on disk, a merge operator: a write needs no read).
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
// # Assumptions
//
//   - A duplicate carries its first copy's key (a producer's retry does),
//     so it lands in the same input partition; the input topics' partition
//     counts do not change within the window.
//   - One process at a time handles an input partition (the group and the
//     lease see to that); a replay beside the live bridge over the same
//     records is not serialised with it.
//
// The package holds no partner client and decides nothing about calls: the
// bridge asks it and tells it (internal/bridge).
package ledger
