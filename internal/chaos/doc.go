// Package chaos holds the bridge's chaos suite (tests only): three bridge
// replicas in one consumer group, killed and restarted on a schedule, while
// Kafka drops connections on produce and fetch requests (kfake control
// functions) and the partner API simulator answers 5xx, 429 with
// Retry-After, applies writes and then answers 500, hangs, and issues
// tokens that live seconds and get revoked.
//
// At the end the suite checks, and prints as a table:
//
//   - every input transactionId has a terminal output (result or error);
//   - no accrual or redemption has more than one effect in the simulator's
//     ledger, and every one answered APPLIED or ALREADY_APPLIED has exactly
//     one;
//   - every member's link state matches a model of its command sequence;
//   - the group's committed offsets equal the input topics' end offsets;
//   - how many reply records a read_committed reader sees twice: allowed
//     at least once (TestChaos), none in exactly-once mode
//     (TestChaosExactlyOnce, --delivery exactly-once).
//
// Size it with CHAOS_EVENTS (default 600, what CI runs) and CHAOS_KILLS
// (default 4): CHAOS_EVENTS=100000 CHAOS_KILLS=30 go test -run Chaos
// -timeout 1h ./internal/chaos/ is a long local run.
package chaos
