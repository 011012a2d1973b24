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
//   - Slow start. The limit starts at Options.Initial (8) and grows by one
//     per success, doubling per round trip, until the first decrease.
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
// the load: every round sees a refusal, and every round cuts. The limiter
// therefore tells noise from congestion by what a decrease changes.
// Congestion refusals are caused by the load: once the limit is cut, they
// stop. Noise refusals go on at the same share.
//
// So after each decrease a check counts the outcomes of the next limit's
// worth of calls (at least 16), all sent at the lower limit, and the noise
// floor is the lower of the last two checks' push-back shares (counting
// one refusal less than seen, so that a lone refusal is no floor). Slow
// start, which began at a low limit, is a check too. Push-backs count as
// congestion only when they exceed the floor's expectation by three
// standard deviations and half a call (with a floor of 0, the first
// push-back). The floor is capped at 25%: a partner refusing more than
// that is overloaded, however steady the share.
//
// Why checks, and why two: the previous attempt learned a "background"
// rate from every round and failed with three replicas, each learning the
// others' push-backs as its background. A check after a decrease sees
// little of the others' load, because with the same signal they cut in
// the same round trips (TCP's synchronised losses), so checks after
// congestion are clean and the floor stays at 0; two checks in a row must
// agree before the floor rises. Random refusals do not stop when anyone
// cuts, so they raise it within two decreases.
//
// # What it does not do
//
//   - A replica whose partner is shared with clients that do not back off
//     (another system, or replicas with --adaptive-concurrency=false)
//     shrinks to what is left, as a TCP flow does beside UDP.
//   - A partner slower for good raises the base latency only after a
//     decrease for latency has not lowered it.
//
// The tests in sim_test.go drive Limiters in a deterministic simulation
// (simulated clock, seeded randomness) of the partner in internal/sim:
// capacity 32 at 10 ms for one client and for three, 10% random 503 and
// 500, an outage, a late replica and a queueing partner.
package callimit
