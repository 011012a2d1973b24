// Package ordering is the pure scheduling core of the pipeline: which of the
// records taken from one partition may run now, and up to which offset the
// partition may be committed.
//
// Two types, one per concern, both for a single partition and neither safe
// for concurrent use (the pipeline owns one of each per assigned partition
// and guards them with its own lock):
//
//   - Scheduler decides dispatch order. In Key mode, records with the same key
//     form a lane and run one at a time in offset order, while different lanes
//     run concurrently (key-ordered concurrency, as in Confluent's Parallel
//     Consumer). Records with a nil or empty key share one lane: an unkeyed
//     record has no ordering promise from its producer, but running all of them
//     serially is the conservative reading and keeps them in offset order.
//     Partition mode puts every record in one lane (strict serial per
//     partition); Unordered mode has no lanes at all. Among the lanes that
//     may run, the one whose next record has the lowest offset goes first, so
//     the commit point advances as early as possible.
//   - Tracker records which taken offsets are done and reports the highest
//     contiguous done point, the only offset that may be committed. Offsets
//     need not be consecutive (compacted topics, transaction markers): only
//     the offsets added count.
//
// The package knows nothing of Kafka clients, handlers, time or goroutines;
// it must stay that way so that it can be tested exhaustively and cheaply.
package ordering
