// Package lease decides one thing: whether a member of a Kafka consumer
// group may start a partner write now, so that the write has ended before
// the group can have given the member's partitions to another member.
// Its inputs are group events (a JoinGroup answered, an assignment
// received, a heartbeat answered, an expulsion) and the clock; its output
// is Lease.Held, and Lease.Until with a channel closed when the lease
// grows. Probe and Hook turn a franz-go client's group traffic into those
// events. It does not know records, partitions, handlers or the partner:
// the pipeline asks it before a handler's write and waits while it says no.
//
// # The rule
//
// A member that loses Kafka does not lose the partner: cut off from the
// coordinator (a network partition, a pause, a kill that leaves the
// process running for its drain), it keeps the partitions it was given as
// far as it knows, while the group expels it once its session times out
// and hands them to another member. That member guards the records the
// dispatch horizon covers, by a lookup before each write; a write the
// expelled member sends after that lookup is applied a second time by a
// partner without duplicate detection. The horizon says which records are
// uncertain, not when their old owner stops writing them.
//
// So a member starts a partner write only while the group cannot yet have
// given its partitions away for the whole time the write may take. The
// coordinator of the classic group protocol removes a member in two ways:
// when its session times out, SessionTimeout after the last heartbeat it
// received, and when a rebalance's join phase ends without it, at most
// RebalanceTimeout after the rebalance began (the group's rebalance
// timeout is the largest its members ask for, and this member asks for
// RebalanceTimeout). So a write may start while
//
//	now + CallTimeout <= min(sent + SessionTimeout, stable + RebalanceTimeout)
//
// where sent is when the member sent the last heartbeat answered as a
// member of the group (the coordinator received it then or later), and
// stable when it sent the last one answered without a rebalance, of the
// generation whose assignment the member holds: the group was stable with
// the member in it when that heartbeat arrived, so a rebalance that could
// remove it began later, and ends no sooner than stable + RebalanceTimeout.
// A heartbeat answered REBALANCE_IN_PROGRESS renews sent only: the member
// is counted in until its session ends, but the rebalance may have begun
// just after the last stable answer and will remove it when the join phase
// ends without its JoinGroup (one cut off mid-rebalance). A heartbeat of a
// generation whose assignment the member has not received yet (between
// its JoinGroup's answer and its SyncGroup's, which Kafka answers without
// an error) renews sent only as well: the coordinator removes a member
// that does not sync within the rebalance timeout. The bound holds without
// a rebalance seen too: a member cut off before its first
// REBALANCE_IN_PROGRESS is removed when the rebalance its successor's
// JoinGroup starts times out, long before its session would.
//
// A SyncGroup answered with an assignment renews stable too, to a moment
// before it was sent (when the JoinGroup before it was answered): the
// coordinator answers it only once the group is stable at that
// generation, with the member in it. Without it, a member whose
// first heartbeat after joining is already answered REBALANCE_IN_PROGRESS
// (replicas started one after another: each JoinGroup starts a rebalance)
// had no lease at all; its first records waited for one, its revoke drain
// waited for them, and the rebalance waited for the drain: a DrainTimeout
// lost at every start-up, and every record it had dispatched guarded by
// its successors (loyalty-bench, three replicas with one core busy: 1.6
// partner calls per record). The SyncGroup does not renew sent: kfake
// restarts the session at a heartbeat or a JoinGroup, not at a SyncGroup.
//
// A rebalance does not stop writes as long as it ends within
// RebalanceTimeout - CallTimeout of the last stable answer (10s by
// default): with the cooperative-sticky balancer members keep their
// partitions and rejoin at the first REBALANCE_IN_PROGRESS, and once the
// new generation's assignment is received (OnPartitionsAssigned, after
// the revoke of partitions moved away) its SyncGroup and heartbeats renew
// stable again. A longer rebalance (a member slow to rejoin, a long revoke
// drain) holds writes until then. The pipeline raises RebalanceTimeout to
// CallTimeout plus a margin when its drain's own margin leaves less.
//
// Probe sends heartbeats of its own, every HeartbeatInterval and at once
// when a write finds the lease short (Want): franz-go's heartbeats do not
// tell their answers, and a heartbeat whose answer says the member is out
// (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, a fenced instance) must not
// count. A JoinGroup does not count either: kfake keeps a member whose
// JoinGroup it parks only as long as its session, and Kafka answers the
// prober's heartbeats meanwhile with REBALANCE_IN_PROGRESS.
//
// # Assumptions
//
//   - The partner applies a request within the call duration SetTimeouts
//     is given of the write's start, or never. The pipeline gives it the
//     attempt timeout plus the partner's apply window (--api-timeout plus
//     --partner-apply-window): a write is sent within the first and
//     applied within the second of its sending. A request the partner
//     applies later than that may be applied after the successor's
//     lookup, and nothing on this side can see it.
//   - The classic group protocol, with the coordinator's clock running at
//     the member's rate while the member runs.
//   - The member's host is not suspended while it holds a lease. The
//     lease's deadlines are on Go's monotonic clock (time.Now, Sub,
//     Before), which on Linux is CLOCK_MONOTONIC and does not advance
//     while the host is suspended (a laptop's sleep, a VM paused or live-
//     migrated with its clock stopped), whereas the coordinator's clock
//     does. A member suspended for S resumes with its lease ending S
//     later, in real time, than the rule allows: until a heartbeat sent
//     after the resume is answered (Probe sends one every
//     HeartbeatInterval; an answer saying the member is out ends the lease
//     at once), it may start writes that take effect up to S after the
//     group may have removed it, which a successor's lookup may already
//     have missed. Nothing bounds S. The lease takes no injectable clock,
//     so it does not read CLOCK_BOOTTIME; this is the exact limit. A
//     process stopped (SIGSTOP, a GC pause) is not suspended: the
//     monotonic clock runs on, and the lease covers it.
//   - The last check is the one before the request leaves: what runs
//     between Held and the write (a token refresh, a call slot) must be
//     short next to CallTimeout, or be checked again.
//   - Static membership (kgo.InstanceID) is not covered: a replacement may
//     take the partitions at once while the old instance still holds its
//     lease.
package lease
