// Package benchkit measures loyalty-bridge against a ceiling and a
// baseline on the same work, in one run, and reports the figures.
//
// # Model
//
// A Scenario fixes the work: N PurchaseCompleted events over K member keys
// on P partitions, the simulated API latency and the in-flight limit. Each
// contestant gets a stack of its own (kfake, srfake and the simulator from
// internal/devstack, all in the bench process), pre-loaded with the same
// events, so no contestant sees another's records, consumer groups,
// simulator ledger or leftover memory:
//
//   - the ceiling calls the simulator's accrual endpoint with the
//     internal/loyalty client from MaxInFlight goroutines: no Kafka, no
//     Avro, the unavoidable cost of one HTTP call per event;
//   - the baseline is what most teams write first: a franz-go consumer
//     group with a goroutine per partition that takes one record at a
//     time, decodes it, calls the API, produces the reply with ProduceSync
//     and marks it for commit;
//   - the bridge is `loyalty-bridge run`, once per ordering mode.
//
// Every contestant runs as a child process (the ceiling and the baseline
// re-execute the bench binary as `loyalty-bench worker`), so its CPU time
// and peak RSS come from its own rusage and do not include the simulator
// or Kafka. What the bench process itself spends meanwhile (simulator,
// kfake, srfake and the reply collector) is reported beside it as harness
// CPU: the simulator's cost is visible, not hidden in anyone's figures.
//
// # Figures
//
// Completion is observed from outside the contestant: the bench consumes
// the reply topics and counts distinct transactionIds. A record's latency
// is its reply's record timestamp (set by the contestant's producer when
// the reply is produced; the acknowledgement follows within the producer's
// linger) minus the later of the input record's timestamp and the
// contestant's launch, because the backlog was written before the
// contestant existed. For the ceiling the "reply" is the HTTP answer. In a
// backlog drain latency is mostly queueing: its p50 and p99 say how fast
// and how evenly the backlog drains, not how long one API call takes.
//
// Throughput is distinct records divided by the time from the first reply
// to the last; the time from launch to the first reply (process start,
// connections, token, group join) is reported separately as start-up.
//
// The package never asserts on speed: figures are measurements for people.
package benchkit
