// Package chaos holds the bridge's chaos suite (tests only): three bridge
// replicas (service.New, as `loyalty-bridge run` builds them) in one
// consumer group over a devstack (kfake or a real Kafka cluster, srfake,
// the simulator, all over TCP), with faults on every side at once:
//
//   - members: every second the oldest replica goes and one with its id
//     (and transactional id) starts; every other time it is killed (its
//     Kafka connections cut, canceled without a drain, so nothing after its
//     last commit is committed), otherwise stopped gracefully;
//   - Kafka, on kfake (the default): 2% of produce and fetch requests have
//     their connection dropped, 1% fail with NOT_LEADER_OR_FOLLOWER, a
//     partition leader moves to another of three brokers every 400 ms and
//     the group and transaction coordinators every 3.2 s (kfake control
//     functions, Fault, MoveTopicPartition, RehashCoordinators);
//   - Kafka, on the real cluster named by LOYALTY_BRIDGE_TEST_BROKERS
//     (realkafka), which has no such control functions: the members reset
//     their own connections in the middle of a request, on 2% of produce
//     and fetch requests (as on kfake) and, standing in for coordinator
//     moves, 1% of heartbeats, 5% of JoinGroup, SyncGroup and OffsetCommit
//     and 20% of InitProducerID, AddPartitionsToTxn, AddOffsetsToTxn,
//     EndTxn and TxnOffsetCommit (exactly-once mode sends a handful in a
//     run); half are cut before the request is whole, half right after it
//     went out, its answer lost, and the client sees the error Go's net
//     package gives (the table counts drops and requests by key); with
//     more than one node, every 400 ms
//     the leader of a random partition of the run's topics moves to
//     another replica, and every 3.2 s the leaders of the
//     __consumer_offsets partition of the group and (exactly-once mode)
//     of the __transaction_state partitions of the transactional ids, and
//     the coordinators with them (kadm: a reassignment that only reorders
//     the replicas, then a preferred-leader election; TestMoveCoordinator
//     shows the coordinator follows). A real broker answers
//     NOT_LEADER_OR_FOLLOWER only when a leader has moved, so on one node
//     there are no such errors and nothing moves;
//   - the partner API: 5% 500, 5% 503, 2% 429 with Retry-After, 1% dropped
//     connections, 2% writes applied then answered 500, 0.5% hangs, a
//     300 ms burst of nothing but 429 every 2 s, tokens that live three
//     seconds and are revoked at every kill;
//   - a partner as bad as the spec allows (TestChaosBadPartner,
//     TestChaosBadPartnerExactlyOnce; issue 29): it applies a repeated
//     transactionId again, answers 4% of accruals and redemptions 504 and
//     applies them 300 ms later, and its lookups see a transaction 300 ms
//     after it applied, all through the bursts and until every member has
//     stopped; then the late writes still pending land (FlushLateApplies)
//     before the checks, and the run fails unless some landed late.
//
// The members call the partner with --api-timeout 1s and
// --partner-apply-window 1s (above the 600 ms a late write takes to show
// in a lookup) in 3 s group sessions: a member starts a write only while
// its session outlasts the call and the window, and the pipeline refuses
// a session not above their sum.
//
// At the end, on a fresh read of the reply topics, the suite checks and
// prints as a table:
//
//   - every input transactionId has a terminal output (result or error);
//   - no accrual or redemption has more than one effect in the simulator's
//     ledger, and every one answered APPLIED or ALREADY_APPLIED has exactly
//     one: against a partner that rejects a repeated transactionId
//     (TestChaos) and against one that applies it again
//     (TestChaosDuplicatesApplied, --duplicate-policy apply), where only
//     the bridge's ledger, guard, dispatch horizon, takeover wait and
//     lease keep one effect;
//   - no transactionId in the simulator's whole ledger applied more than
//     once (it would list clawback slots too, but the traffic has no
//     refunds yet), and no late write left pending;
//   - every member's link state matches a model of its command sequence;
//   - the group's committed offsets equal the input topics' end offsets;
//   - how many reply records a read_committed reader sees twice: allowed
//     at least once (TestChaos), none in exactly-once mode
//     (TestChaosExactlyOnce, --delivery exactly-once);
//
// and reports, without a bound: transactions ending in an error event,
// writes the partner refused as repeats of an applied transaction (a
// partner that does not deduplicate would have applied them twice), and
// reply records written in aborted transactions.
//
// Each run has its own topics, group and transactional ids
// (realkafka.Name); on a real cluster the topics and group are deleted at
// its end. With LOYALTY_BRIDGE_TEST_BROKERS set the suite runs there, as
// `go test -run Chaos ./internal/chaos/` with the same assertions; it needs
// group.min.session.timeout.ms at most 2000 (scripts/kafka sets 500).
//
// Size it with CHAOS_EVENTS (default 600, what CI runs) and CHAOS_KILLS
// (default 4): CHAOS_EVENTS=100000 CHAOS_KILLS=30 go test -run Chaos
// -timeout 1h ./internal/chaos/ is a long local run. CHAOS_LOG=DIR writes
// each member incarnation's debug log to DIR, to trace a failure.
package chaos
