// Package chaos holds the bridge's chaos suite (tests only): three bridge
// replicas (service.New, as `loyalty-bridge run` builds them) in one
// consumer group over a devstack (kfake, srfake, the simulator, all over
// TCP), with faults on every side at once:
//
//   - members: every second the oldest replica goes and one with its id
//     (and transactional id) starts; every other time it is killed (its
//     Kafka connections cut, canceled without a drain, so nothing after its
//     last commit is committed), otherwise stopped gracefully;
//   - Kafka: 2% of produce and fetch requests have their connection
//     dropped, 1% fail with NOT_LEADER_OR_FOLLOWER, a partition leader
//     moves to another of three brokers every 400 ms and the group and
//     transaction coordinators every 3.2 s (kfake control functions,
//     Fault, MoveTopicPartition, RehashCoordinators);
//   - the partner API: 5% 500, 5% 503, 2% 429 with Retry-After, 1% dropped
//     connections, 2% writes applied then answered 500, 0.5% hangs, a
//     300 ms burst of nothing but 429 every 2 s, tokens that live three
//     seconds and are revoked at every kill.
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
//     the bridge's guard, dispatch horizon, takeover wait and lease keep
//     one effect;
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
// Size it with CHAOS_EVENTS (default 600, what CI runs) and CHAOS_KILLS
// (default 4): CHAOS_EVENTS=100000 CHAOS_KILLS=30 go test -run Chaos
// -timeout 1h ./internal/chaos/ is a long local run. CHAOS_LOG=DIR writes
// each member incarnation's debug log to DIR, to trace a failure.
package chaos
