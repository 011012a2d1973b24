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
// comes from its own rusage and does not include the simulator or Kafka.
// Its peak RSS is the VmHWM of its own address space, sampled from /proc:
// ru_maxrss cannot be used, because Go starts children sharing the
// parent's memory until exec and Linux carries that memory's high-water
// mark into the child. What the bench process itself spends meanwhile
// (simulator, kfake, srfake and the reply collector) is reported beside
// it as harness CPU, and the whole machine's busy share (/proc/stat)
// beside the bench's own: the simulator's cost, and any other load on the
// machine, are visible rather than hidden in anyone's figures.
//
// # Figures
//
// Completion is observed from outside the contestant: the bench consumes
// the reply topics and counts distinct transactionIds. A record's latency
// is its reply's record timestamp (set by the contestant's producer when
// the reply is produced; the acknowledgement follows within the producer's
// linger) minus the later of the input record's timestamp and the
// contestant's launch. For the ceiling the "reply" is the HTTP answer.
//
// By default the events are a backlog written before the contestant
// starts: throughput is then the claim, and latency is mostly queueing
// (its p50 and p99 say how fast and how evenly the backlog drains). With
// Scenario.Rate the events are written at a fixed rate while the
// contestant runs (open loop), and latency measures the pipeline; records
// written before the contestant's first reply are left out of it.
//
// Throughput is distinct records divided by the time from the first reply
// to the last, and again over the second half of the replies (without
// start-up effects); the time from launch to the first reply (process
// start, connections, token, group join) is reported separately. To say
// where the time goes, the bench samples the handler time the replies
// carry (latencyMs), derives the time each record held an in-flight slot
// (Little's law) and scrapes the bridge's in-flight and held gauges from
// its /metrics. Config.BridgeProfile runs the bridge's service inside a
// worker under the CPU profiler (and writes a heap profile near the heap's
// peak), since the bridge binary serves no pprof.
//
// # Scenarios
//
// Config.Scenarios measures several partner behaviours in one run, each
// on a fresh stack, beside the fault-free one (ParseScenario reads the
// specs: error rates, Retry-After, capacity, latency, in-flight,
// replicas, a credentials outage, the delivery mode, a rolling restart,
// the ledger's age). Every result then carries its
// throughput as a ratio of the same contestant's in the clean scenario,
// and the share of business calls the simulator answered 429 or 503
// (from its counters). Replicas are several bridge processes in one
// consumer group against the one simulator: their throughput is
// combined, their CPU summed, their peak RSS the largest. A credentials
// outage rotates the simulator's client secret and password (revoking
// every token) once a quarter of the records are answered and restores
// them later; the result says how many records became error events and
// how long after the restore the first reply came. A ledger age writes,
// before the bridge starts, one settled entry per input partition dated
// that long ago into the bridge's ledger topic (created by the bench
// then), so that the run measures a deployment whose ledger has run that
// long rather than the first hour after its rollout: past
// ledger.RolloutMargin a new owner of a partition no longer looks up
// records the ledger has no intents for.
//
// The package never asserts on speed: figures are measurements for people.
package benchkit
