package pipeline

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// strategy is the one place where the delivery modes differ: at-least-once
// with the dispatch horizon (atLeastOnce, horizon.go) and exactly-once
// with transactional rounds (exactlyOnce, transact.go and rounds.go). Each
// owns its state: per partition (partition.state, set in openLocked), per
// record (job.state) and its own. The core (pipeline.go, poll.go, work.go,
// group.go) polls, schedules by key, bounds what is buffered and in flight,
// runs handlers and Fallback, keeps each partition's commit point and
// drains; it asks the strategy at each point below and never asks which
// mode it runs.
//
// Methods named ...Locked are called with Pipeline.mu held and must not
// block; the others without it.
type strategy interface {
	// clientOpts are the mode's client options, added to the core's.
	clientOpts() []kgo.Opt
	// run is Run: it creates the client, drives the core's poll, dispatch
	// and drain in the mode's order, and closes.
	run(ctx context.Context) error

	// openLocked gives a partition the core starts tracking its mode
	// state.
	openLocked(part *partition)
	// assignedLocked is called for a partition the group assigned (not one
	// adopted from a poll), after openLocked. A strategy that sets
	// part.guardAfter here makes the assignment's log say its records
	// wait.
	assignedLocked(part *partition)
	// admitLocked takes a record just polled: it schedules it
	// (part.sched.Push) now or later, and sets j.fresh. False skips the
	// record: it is neither buffered nor committed by the core.
	admitLocked(part *partition, j *job) bool
	// mayStartLocked reports whether part's records may be dispatched at
	// all now; the core's own limits, drain and guard apply besides.
	mayStartLocked(part *partition) bool
	// priorFailure returns the produce failure a record brings from an
	// earlier attempt, which sends it to Fallback (or, after Fallback's
	// outputs failed, stops Run) instead of the Handler.
	priorFailure(j *job) (outFailure, bool)
	// produce takes a record's outputs once its Handler (or Fallback)
	// returned. It releases the record's lane (Pipeline.releaseLane) and
	// leads the record to finish, now or later.
	produce(j *job, outs []*kgo.Record)
	// releasedLocked is called once the record's handler slot and lane
	// are free.
	releasedLocked(j *job)
	// settleLocked is called as the record leaves flight, before the core
	// moves its partition's commit point.
	settleLocked(j *job, outcome Outcome)
	// revoked and lost are the group's OnPartitionsRevoked and
	// OnPartitionsLost (the lease is told of a loss first).
	revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32)
	lost(ctx context.Context, cl *kgo.Client, lost map[string][]int32)
}

// outFailure is a produce failure a record brings from an earlier attempt
// (exactly-once: its outputs failed in a round that was aborted): the next
// time it is taken it goes to Fallback (or, if those were Fallback's
// outputs, stops the pipeline), as a produce failure does at least once.
type outFailure struct {
	err      error
	fellBack bool
}
