// Package pipeline is the bridge's Kafka engine: a consumer group that takes
// records, runs a Handler on each with key-ordered concurrency, produces the
// handler's output records asynchronously, and commits an input offset only
// once every record before it has all its outputs acknowledged by Kafka.
//
// # Model
//
// One franz-go client both consumes (consumer group, BlockRebalanceOnPoll,
// the pipeline's own offset commits) and produces (idempotent, acks=all, a short deliberate
// linger). Three kinds of goroutine, all owned by Run:
//
//   - the poll loop takes at most as many records as the buffer has room
//     for and hands them to a per-partition ordering.Scheduler and
//     ordering.Tracker, pausing a partition whose buffer is full; a record
//     at or past its partition's dispatch horizon waits for the horizon
//     to move before it is scheduled;
//   - the dispatcher waits on the Gate, then hands a runnable record (the
//     lowest runnable offset of its partition) to a record worker while
//     the global and per-partition in-flight limits allow: an idle one,
//     or a new one when none is idle (work.go), so each record still has
//     a goroutine of its own while it runs;
//   - that worker runs the Handler and calls Produce with a promise; it
//     never waits for acknowledgements, and then waits for its next
//     record (idle workers are at most about MaxInFlight). The last
//     promise of a record marks it done, which may advance the
//     partition's commit point;
//   - a committer commits the commit points every CommitInterval, and moves
//     dispatch horizons when asked.
//
// Ordering applies to handler calls: the next record of a lane (a key in
// ordering.Key mode, the partition in ordering.Partition mode) is dispatched
// as soon as the previous handler, and its Fallback if any, has returned, not
// when its outputs are acknowledged; so effects happen in offset order and
// outputs are produced in offset order, which the idempotent producer keeps
// unless an output fails (its fallback output then comes later).
//
// MaxInFlight bounds handler calls: a slot is taken at dispatch and freed
// when the handler (and its Fallback, if any) returns, and also for as long
// as the handler waits in Wait (a back-off, a Retry-After): the record
// keeps its lane and its place in the commit order, and takes its slot back
// at once when the wait ends, even above MaxInFlight (new records wait until
// the count is under it again: waiting for a slot could deadlock behind
// handlers that wait on this one, such as a circuit's probe). Records whose outputs
// await Kafka's acknowledgement hold no slot (holding one costs a produce
// round trip per record, a third of the throughput against a 20 ms API,
// measured with loyalty-bench); they stay buffered, so MaxBuffered bounds
// them. A record is in flight, for drains and revocations, until its last
// output is acknowledged.
// Buffered records (taken but not yet below the commit point: waiting,
// in flight, or done above a gap) are bounded by MaxBuffered and
// MaxBufferedBytes globally and, softly, by MaxBufferedPerPartition and
// half the bytes per partition; a full partition is paused with
// PauseFetchPartitions (franz-go drops and later refetches what it had
// buffered for it) while the other partitions go on. Memory is therefore
// bounded by configuration: MaxBuffered records (MaxBufferedBytes) here,
// a goroutine for each record waiting in Wait and at most about
// MaxInFlight idle workers, plus franz-go's fetch
// buffers (about one fetch response per broker, FetchMaxBytes 1 MiB here)
// and its produce buffer. FetchMaxWait is 250ms rather than franz-go's 5s:
// a resumed partition waits for the fetch in flight for the others.
//
// A group with no commits starts at the earliest offset (franz-go's
// default), so a new deployment misses nothing.
//
// # Core, strategy, lease
//
// The two delivery modes share the core and differ only behind one
// interface, strategy (strategy.go):
//
//   - the core (pipeline.go, poll.go, work.go, group.go) polls, keeps each
//     partition's ordering.Scheduler and ordering.Tracker, bounds what is
//     buffered (pausing full partitions) and what runs (counters, one per
//     partition and one in all: active ≤ handling ≤ in flight), runs
//     handlers and Fallback, moves commit points, holds a partition's
//     records while a takeover wait lasts, and drains;
//   - a strategy decides what the core cannot: whether a polled record is
//     admitted and when it may be scheduled (admit), what happens to a
//     record's outputs (produce), what its leaving flight means (settle),
//     and what a group event does to the mode's state (assigned, revoked,
//     lost). atLeastOnce (atleastonce.go, horizon.go) keeps the dispatch
//     horizon and commits offsets itself; exactlyOnce (transact.go,
//     rounds.go) runs rounds and commits them in transactions. Each keeps
//     its own per-partition state (partition.state);
//   - the lease (package lease) answers whether this member may start a
//     partner write now; the pipeline feeds it the group's events and its
//     own heartbeats' answers, and Leased waits on it.
//
// A third mode (one that writes a ledger entry before dispatch, say) is a
// new strategy and a Delivery value; the core does not change.
//
// # Failures
//
// A Handler error is a bug path, never a silent drop: Fallback turns the
// record into error outputs (for the bridge, an INTERNAL error event). A
// produce failure after franz-go's own retries goes to Fallback too, once,
// with an error matching ErrProduce. If there is no Fallback, it fails, or its
// outputs fail, Run stops with a *RecordError; the record is never marked
// done, so nothing at or after it is committed. Records abandoned because
// their partition was revoked or lost, or because shutdown's drain timed out,
// are not committed either: the next owner processes them again, and the
// Fresh flag lets the handler guard against repeating an effect.
//
// # The dispatch horizon
//
// Which records a new owner must guard is not guessed. Every offset commit
// carries, in its metadata, the partition's dispatch horizon: an offset
// below which records may have been dispatched (and so may have reached the
// partner). No record is dispatched until a commit covering it with the
// horizon has succeeded; the horizon is moved HorizonStep records past the
// highest offset taken whenever less than half a step is left, one commit
// for many records, and a clean revoke or stop lowers it to just past the
// highest offset dispatched. The next owner reads the committed offset and
// horizon before it fetches, and marks Fresh exactly the records between
// them, however a previous owner died: nothing before the committed offset
// is processed again, nothing at or after the horizon was ever sent. A
// partition with no commit was never dispatched by such a member; a commit
// without a horizon (an older version, an offsets tool) gets a buffer's
// worth (MaxBufferedPerPartition) of Fresh records. While commits fail,
// records past the horizon wait. Exactly-once mode commits in transactions
// and keeps its own rule (below). A member never commits a horizon below
// the one it inherited: the records a previous owner may have sent stay
// uncertain until they are done, however many owners the partition passes
// through.
//
// # When the previous owner's writes have landed
//
// The horizon says which records a new owner guards, not when the old
// owner's last partner call has landed; a guard lookup made before that
// finds nothing, and a partner without duplicate detection applies the
// write twice. Two bounds close the gap, both resting on one assumption,
// stated in CallTimeout and ApplyWindow: a call the handler started is
// sent within CallTimeout (for the bridge, --api-timeout) and applied
// within ApplyWindow (--partner-apply-window) of its sending, or never; so
// it has taken effect CallTimeout + ApplyWindow after it started, or never
// will. The two add: the window counts from the sending, which may come as
// late as CallTimeout after the start, and is the partner's, not bounded
// by how long the member waits for an answer.
//
//   - The lease (package lease): a handler's partner write starts only while
//     now + CallTimeout + ApplyWindow is before the earliest moment the group may
//     remove the member: the sending time of the last heartbeat answered
//     as a member plus the session timeout, and the sending time of the
//     last one answered without a rebalance (of the generation whose
//     assignment the member holds) plus the rebalance timeout, after which
//     a rebalance that began later removes a member whose JoinGroup did
//     not arrive. The pipeline sends heartbeats of its own for this, since
//     franz-go's do not tell their answers; one answered as not a member
//     (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION) ends the lease at once, one
//     answered REBALANCE_IN_PROGRESS renews only the session's bound. A
//     write that finds the lease short waits in Leased (its slot given
//     back; the loyalty client takes its call slot only after the wait,
//     through LeaseGate) for a heartbeat that renews it, and ends with
//     the record's context when the partition is lost or revoked after a
//     drain timeout. So a member cut off from the coordinator (heartbeats
//     unanswered, a pause, a JoinGroup lost or parked) stops writing
//     before the group can give its partitions away, and its last writes
//     land before then.
//   - The takeover wait (horizon.go): a final commit made when none of the
//     partition's handlers runs or was cut off marks the horizon released;
//     a new owner of a partition whose horizon is not released (a crash,
//     an expulsion, a drain timeout that canceled handlers whose requests
//     may be on the wire) holds its records TakeoverWait (CallTimeout plus
//     ApplyWindow plus DefaultTakeoverMargin; the configuration refuses
//     one below CallTimeout plus ApplyWindow) from the assignment before the first guarded
//     lookup. It covers the calls of a member that cut its own handlers
//     off, and is a second margin for an expelled one.
//
// What neither bound can cover: a partner, or a proxy before it, that
// applies a request later than ApplyWindow after it was sent. The attempt
// timeout bounds when the member stops waiting, the window when the
// partner applies; the second is the partner's to state, and the bridge
// only assumes it.
//
// # Exactly once
//
// With Delivery ExactlyOnce the client is a franz-go GroupTransactSession
// (transactional producer, read_committed consumer) and work goes in rounds:
// one poll of at most RoundRecords records; every record handled as above
// (same lanes, limits, Gate and Fallback), its outputs held in memory; then
// one transaction produces all of the round's outputs, in poll order, and
// commits its offsets. A reader with isolation level read_committed sees
// each output once, whatever happens to members.
//
// A round's results wait for its last record, and a stop waits for the
// round (DrainTimeout) or aborts it, so a round's length is sized in time
// as well as in records: after the first, a round polls at most what the
// last committed one answered in RoundTime (roundLimit). A partner that
// slows down (latency, push-back, the adaptive call limit) makes rounds
// smaller, not longer: at the bench's 20 ms and 256 in flight on a loaded
// machine, rounds of 4,096 records had grown to 12 s, so a rolling
// restart's stop timed out its drain, aborted the round and cut its calls
// off, and the partition's next owner waited for them to land. And a round
// takes a share of each partition that lags (fair.go): franz-go's poll
// takes one partition's fetched records before the next's, so a round
// polls at most its share at a time and pauses, until it has polled, the
// partitions that had theirs.
//
// Outputs are produced only at the end of a round so that a transaction
// lasts a produce and a commit, not the handlers' API calls: it cannot time
// out while the Gate holds records, and a dead member's transaction holds
// back readers for a short TransactionTimeout at most (none when it is
// restarted with its TransactionalID, which fences it at start-up).
//
// A round that cannot commit is aborted: when the group rebalances during
// it (the session aborts then anyway: another member may already own a
// partition), when a record is abandoned, when shutdown's drain times out,
// or when an output fails. Its handlers are canceled, the consumer goes
// back to the committed offsets, and everything the round took is taken
// again with Meta.Fresh set, since its effects may have happened. A record
// whose output failed goes to Fallback (ErrProduce) when taken again,
// unless the broker refused the transactional producer's state rather
// than the record (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
// UNKNOWN_PRODUCER_ID and the like: producer state lost with a truncated
// log, a transaction the coordinator aborted): the abort renews the
// producer (franz-go bumps its epoch) and the records run again as they
// were; a fourth such round in a row stops Run instead. An
// error ending a transaction stops Run: franz-go reports only errors it
// cannot retry (a fenced or failed producer, an unreachable cluster).
//
// Its records wait, as at-least-once mode's guarded records after an
// unclean takeover, TakeoverWait before they run: after every round
// aborted while handlers ran, so that the calls cut off have landed before
// a guard looks them up; and after an assignment, unless the partition's
// committed offset says that no previous owner's call can still land
// (release.go). Two commits make it say so:
//
//   - the claim: before its first dispatch of a partition assigned to it,
//     a member commits, in a transaction, the partition's committed offset
//     again (the log's start if there was none) with a claim as its
//     metadata; the partition stays paused until that commits. So whoever
//     dispatched a record of a partition left a commit, and a member that
//     dies with calls on the wire leaves its claim or a round's commit as
//     the latest;
//   - the release: the committed offset again with a release marker, for
//     each partition none of whose handlers runs or was cut off within
//     TakeoverWait and whose own wait is over. A member that stops commits
//     it in one more transaction after its last round, before it leaves
//     the group. A revocation (not a loss) lets the doomed round's
//     handlers finish their calls, nothing new starting, for half of
//     DrainTimeout before it cuts what still runs, and commits it for the
//     revoked partitions as a plain offset commit inside the callback:
//     franz-go's GroupTransactSession cannot end a transaction there (its
//     End takes the lock the callback holds), and after the callback the
//     partition is gone. Either commit is taken by the coordinator only
//     from a member of the current generation, so an expelled member
//     cannot write it; the transaction also needs the current producer
//     epoch. The plain one re-commits what the member's last transaction
//     committed: the session changes what it believes committed only as a
//     transaction ends, under the lock the callback holds, so either that
//     transaction ended before the callback or it aborts after it (the
//     session saw the revocation), its pending offsets with it.
//
// A new owner reads the committed offset before it fetches: with a
// release marker as its latest commit (nobody claimed since, so nobody
// dispatched), or with no commit at all (nobody ever claimed, and then no
// record is Fresh either), its records run at once; with anything else (a
// claim, a round's commit, another version's) they wait. So a fresh
// deployment, a clean stop's partitions and a partition moved between
// running members start at once, and a revocation leaves no wait on the
// partitions the member keeps (nothing was cut); a crash, an expulsion, a
// loss, a drain timeout and a handler that outlives half of DrainTimeout
// still wait. The transaction ledger plays no part: the marker is about
// calls on the wire, which --ledger=false does not change, and a ledger
// entry is not fenced by the group's generation. The cost is one claim
// transaction per assignment, one release commit per revocation or clean
// stop, and a revocation that waits for the round's running calls.
//
// A round that aborts discards the outputs of its records whose handlers
// returned, though their effects happened: Options.Salvage is given them
// first (inside a revocation, before the revoked partitions are released;
// otherwise before the records are taken again), to write outside the
// transaction what must outlive it. The service writes the transaction
// ledger's settled entries there: without them the records, run again by
// the partition's next owner, found only their intents and waited for
// those calls to settle (about 17 s with the defaults) before looking
// them up; loyalty-bench's rolling-restart scenario showed it.
//
// During a rolling upgrade from a build without claims, a member of the
// old build that dies in its first round of a partition never committed,
// or of one a new member released, leaves nothing that says so; its
// partition's next owner does not wait. A clean rolling restart is the
// upgrade: no partition is taken over uncleanly while both builds run.
//
// The price: a round waits for its slowest record, so a key with several
// records in a round takes that many handler calls in a row; outputs appear
// only at the end of their round; the next poll waits for the commit. Use
// it when consumers of the outputs cannot tolerate duplicates; the partner
// API's own protection is the handlers' guard either way, since a
// transaction covers Kafka, not the API call.
//
// # Rebalances and shutdown
//
// On revoke the pipeline stops dispatching the partition's new records,
// waits for its in-flight records (at most DrainTimeout), drops the rest,
// commits the contiguous point (with the lowered horizon), then returns from
// the callback. A drain still runs the records below the highest one
// dispatched, those that waited behind an earlier record of their key
// while later ones ran: otherwise the commit stops at the first of them
// and the next owner redoes every record done after it. On loss it drops
// everything without committing. On assignment the committed offset and
// horizon are read. When Run's context is canceled: stop polling and
// dispatching new records, drain (at most DrainTimeout, the same way),
// commit, flush, leave the group, close. In ExactlyOnce mode
// a revocation aborts the round once its running handlers returned (its
// outputs are not committed, its records are taken again), and shutdown
// gives the current round DrainTimeout to finish and commit, or aborts
// it, then commits the release of the partitions left clean.
//
// The package never decodes values, calls the partner API, or logs record
// keys or values (they may carry personal data): handlers own all of that.
package pipeline
