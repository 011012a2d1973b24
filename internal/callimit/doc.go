// Package callimit bounds partner API calls in progress by a limit that
// adapts, between 1 and a maximum (--max-in-flight), to what the partner
// sustains. The loyalty client takes a slot for each attempt
// (Limiter.Acquire) and gives it back with what the answer said
// (Call.Done with a Signal). With Options.Fixed the limit stays at the
// maximum: a plain semaphore (--adaptive-concurrency=false).
//
// It owns the limit and the slots, nothing else: it never sees a request,
// never waits out a Retry-After (the record that received one does), and
// has no goroutine of its own.
//
// # Why not a library
//
// The Go port of Netflix's concurrency-limits
// (github.com/platinummonkey/go-concurrency-limits) is not served by the
// module proxy this project builds from, and its limits do not fit
// anyway: its AIMD cuts the limit by a fixed ratio on every dropped call,
// so a partner refusing 10% of calls at random (whatever the load) takes
// it to its minimum, and its gradient limits listen to latency alone,
// while an overloaded partner here answers 429/503 at once. No other
// module in the package lists this project draws on tells random
// refusals from congestion.
//
// # The model
//
// AIMD, as TCP's congestion window: grow while calls are healthy, cut on
// congestion. All replicas in a group run it independently against one
// partner, and AIMD's fairness argument holds because each replica gets
// the same feedback (the partner refuses whichever calls arrive while it
// is full) and answers it the same way: equal additive growth and
// proportional cuts converge to equal shares without a coordinator.
//
//   - Rounds. A round lasts one smoothed round trip and ends when a call
//     sent within it completes. Calls sent before the last decrease are
//     not counted: their answers were caused by the old limit, which was
//     already judged (at most one decrease per round trip of calls).
//   - Slow start. The limit starts at Options.Initial (8), stays there for
//     the first 32 calls (the noise floor's first measurement, below),
//     then grows by one per success, doubling per round trip, until the
//     first decrease.
//   - Growth. A round without congestion in which demand reached the
//     limit grows it: by one per round far from the limit of the last
//     decrease, back towards it in a few rounds (binary search, as TCP
//     BIC), and by 1/32 per round within 10% of it, where the partner
//     pushed back last time; beyond it, by one again.
//   - Congestion: push-backs (429, 503, 408; Retry-After or not), attempt
//     timeouts, and three rounds in a row whose mean latency is twice the
//     base latency and 5 ms above it (a partner that queues rather than
//     refuses; three, because a busy machine's own pauses come and go
//     while a queue lasts). The base latency is the lowest round mean,
//     drifting up slowly. It cuts the limit by the share of push-backs above the
//     noise floor, at least 25% and at most 50%.
//   - A push-back answered faster than a round trip keeps its slot for
//     the rest of one. Otherwise the slot goes to the next record at once,
//     is refused at once, and each slot above the partner's capacity costs
//     dozens of refusals per round trip instead of one.
//
// # Random push-backs and the noise floor
//
// Plain AIMD collapses when the partner refuses a share of calls whatever
// the load: every round sees a refusal, and every round cuts. So
// push-backs count as congestion only when they exceed a noise floor's
// expectation by four standard deviations and half a call (with a floor
// of 0, the first push-back is congestion), and a cut takes away the
// share above the floor.
//
// What tells noise from congestion is the load: congestion refusals stop
// when the load is low, noise goes on at the same share. A replica alone
// cannot lower the load (the others' calls are there too), and this is
// what failed before: a replica that learned the push-backs it saw after
// its own decrease as its background learned the other replicas' load,
// tolerated more, and took the capacity; checks after each decrease
// ratcheted every replica's floor up in the same way in these
// simulations. The floor is therefore measured only at low load, in
// dips: every 5 s of wall-clock time, at the same instants on every
// replica (their clocks agree within milliseconds, as TCP flows agree
// through shared losses), each replica halves its limit for 100 ms. The
// whole group's load halves at once, congestion stops, and what is
// refused then is noise. The share of the calls started in the dip is
// pooled with the measurements before it, each older one weighing half.
// A dip costs about 1% of the throughput at the capacity.
//
// Until the first dip, slow start's measurement stands in: the share
// refused to its first 32 calls, all sent at the initial limit (one
// refusal less, so that a lone one is no floor), is the floor. Slow
// start is not ended by a share under the floor's cap before that
// measurement is taken. It is taken before the limit grows because
// replicas starting together overlap their slow starts: measured while
// the limits doubled, it measured the others' growth too, and over HTTP
// three replicas learned each other's load as noise for the first
// seconds (one took 58% of the calls and 6% were refused in the first
// 10 s; in the simulation up to 10% in the first 12 s, one replica held
// at a limit of 1 meanwhile; 0.4–0.6% and a third each since). At the
// initial limit three replicas load a partner of capacity 32 with 24
// calls: none is refused for load. The first dip replaces the
// measurement: a replica joining others already at the capacity still
// measures some of their load in its slow start.
//
// A floor under 2% counts as none (a dip is not perfectly clean, and a
// small floor already lets two push-backs pass where one would cut); one
// above 25% is not noise but an overload or an outage, and is not
// learned.
//
// # What it does not do
//
//   - A replica whose partner is shared with clients that do not back off
//     (another system, or replicas with --adaptive-concurrency=false)
//     shrinks to what is left, as a TCP flow does beside UDP.
//   - A partner slower for good raises the base latency only after a
//     decrease for latency has not lowered it.
//   - A partner refusing under 2% of calls at random gets a cut for each
//     refusal: the limit settles well under the maximum.
//   - Dips last 100 ms: against a partner slower than about 25 ms a dip is
//     a few round trips, and its measurement is rough.
//   - The figures (capacity within 10%, under 1% refused, equal shares,
//     10% random refusals tolerated) hold in these simulations; the
//     tuning constants were chosen with them, and some are close to
//     their edges (a check after each decrease, or a floor pooled
//     without the 2% dead zone, broke the three-replica case).
//
// The tests in sim_test.go drive Limiters in a deterministic simulation
// (simulated clock, seeded randomness) of the partner in internal/sim:
// capacity 32 at 10 ms for one client and for three (in the long run, and
// started together), 10% random 503 and 500, an outage, a late replica
// and a queueing partner.
package callimit
