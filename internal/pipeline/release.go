package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// The claim and the release (exactly-once mode): doc.go, "# Exactly
// once", says what they are and why a new owner may then skip the takeover
// wait. This file writes and reads them: onFetched reads the committed
// offset of a partition just assigned, claim and commitClaim claim it
// before the member's first dispatch, release commits the release marker
// of the clean partitions as the member stops, and releaseRevoked as it
// gives partitions up in a revocation.

// releasedGenPrefix starts the metadata of a release commit; the rest is
// the generation, in decimal.
const releasedGenPrefix = "loyalty-bridge/released-generation="

// claimedGenPrefix starts the metadata of a claim; only its difference
// from a release marker matters, the generation helps a reader of the
// group's offsets.
const claimedGenPrefix = "loyalty-bridge/claimed-generation="

func releasedGenMetadata(gen int32) string {
	return releasedGenPrefix + strconv.FormatInt(int64(gen), 10)
}

func claimedGenMetadata(gen int32) string {
	return claimedGenPrefix + strconv.FormatInt(int64(gen), 10)
}

// parseReleasedGen reads a release marker: the generation it was written
// in, and false when meta is anything but what releasedGenMetadata
// writes.
func parseReleasedGen(meta string) (int32, bool) {
	s, ok := strings.CutPrefix(meta, releasedGenPrefix)
	if !ok {
		return 0, false
	}
	g, err := strconv.ParseInt(s, 10, 32)
	if err != nil || g < 0 || strconv.FormatInt(g, 10) != s {
		return 0, false
	}
	return int32(g), true
}

// onFetched reads, for each partition just assigned (assignedLocked held
// its records TakeoverWait), its committed offset: with a release marker
// or none, its records need not wait. Either way the partition is paused
// until this member's claim commits (claim), before franz-go fetches it.
func (e *exactlyOnce) onFetched(_ context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	p := e.p
	got := fetchedOffsets(resp)
	// Paused first, put in claimAt after: claim resumes what it claimed,
	// and a pause that came after that resume held the partition for good
	// (under load the round loop, not polling yet, committed the claim
	// between this callback's unlock and its pause; no record was fetched
	// again and Run never ended its round).
	inherited := make(map[tp]*partition)
	pause := make(map[string][]int32)
	p.mu.Lock()
	for key := range got {
		if part := p.parts[key]; part != nil && e.inheriting[key] {
			inherited[key] = part
			pause[key.topic] = append(pause[key.topic], key.partition)
		}
	}
	p.mu.Unlock()
	if len(inherited) == 0 {
		return nil
	}
	cl.PauseFetchPartitions(pause)
	gone := make(map[string][]int32)
	p.mu.Lock()
	for key, part := range inherited {
		if p.parts[key] != part || !e.inheriting[key] {
			// Not expected: franz-go revokes after this callback.
			// A partition dropped meanwhile was not paused for the
			// core (dropLocked), so it is resumed here; one assigned
			// again is paused by its own fetch's callback.
			if p.parts[key] == nil {
				gone[key.topic] = append(gone[key.topic], key.partition)
			}
			continue
		}
		f := got[key]
		delete(e.inheriting, key)
		e.claimAt[key] = f.at
		g, released := parseReleasedGen(deref(f.meta))
		if f.at < 0 {
			// Nobody ever claimed it, so nobody dispatched a record of
			// it: none is Fresh (openLocked's guess is for a commit).
			eosState(part).fresh = 0
		}
		if f.at >= 0 && !released {
			continue
		}
		// Only the assignment's wait goes: a cut's (resetRound) is never
		// lifted, though none can be set before the partition's first
		// record is taken.
		if eosState(part).cutAt.IsZero() {
			part.guardAfter = time.Time{}
		}
		if released {
			p.log.Info("partition released cleanly by its previous owner; its records need not wait",
				zap.String("topic", key.topic), zap.Int32("partition", key.partition),
				zap.Int64("committed", f.at), zap.Int32("released_generation", g))
		} else {
			p.log.Info("partition never committed; its records need not wait",
				zap.String("topic", key.topic), zap.Int32("partition", key.partition))
		}
	}
	stopPoll := e.pollCancel
	p.mu.Unlock()
	if len(gone) > 0 {
		cl.ResumeFetchPartitions(gone)
	}
	if stopPoll != nil {
		stopPoll() // claim them now
	}
	return nil
}

// claim commits this member's claim on the partitions read and not
// claimed yet, and resumes them. It returns the context for the next
// poll: canceled by onFetched when a claim becomes possible, and ending
// within a second while a claim failed, so that it is tried again.
func (e *exactlyOnce) claim(ctx context.Context) (context.Context, context.CancelFunc) {
	p := e.p
	p.mu.Lock()
	todo := make(map[tp]int64, len(e.claimAt))
	for key, at := range e.claimAt {
		if p.parts[key] != nil {
			todo[key] = at
		}
	}
	p.mu.Unlock()
	claimed := len(todo) == 0 || e.commitClaim(ctx, todo)
	p.mu.Lock()
	defer p.mu.Unlock()
	pollCtx, cancel := context.WithCancel(ctx)
	var retry *time.Timer
	switch {
	case !claimed:
		retry = time.AfterFunc(time.Second, cancel)
	case len(e.claimAt) > 0:
		cancel() // read while the claim was being committed: claim them first
	}
	e.pollCancel = cancel
	return pollCtx, func() {
		p.mu.Lock()
		e.pollCancel = nil
		p.mu.Unlock()
		if retry != nil {
			retry.Stop()
		}
		cancel()
	}
}

// commitClaim commits the claim on todo's partitions (their committed
// offsets, -1 for none) in a transaction, and resumes them; false when it
// did not commit.
func (e *exactlyOnce) commitClaim(ctx context.Context, todo map[tp]int64) bool {
	p := e.p
	cl := e.sess.Client()
	var topics []string
	for key, at := range todo {
		if at < 0 && !slices.Contains(topics, key.topic) {
			topics = append(topics, key.topic)
		}
	}
	if len(topics) > 0 {
		// Never committed: claim at the log's start, where the session
		// starts too (the group's reset offset).
		starts, err := kadm.NewClient(cl).ListStartOffsets(ctx, topics...)
		if err == nil {
			err = starts.Error()
		}
		if err != nil {
			p.log.Warn("could not read the start offsets to claim partitions never committed; trying again", zap.Error(err))
			return false
		}
		for key, at := range todo {
			if at < 0 {
				o, ok := starts.Lookup(key.topic, key.partition)
				if !ok {
					return false
				}
				todo[key] = o.Offset
			}
		}
	}
	p.mu.Lock()
	floor := maps.Clone(e.txnDone)
	p.mu.Unlock()
	txnCtx := kgo.PreTxnCommitFnContext(p.workCtx, func(req *kmsg.TxnOffsetCommitRequest) error {
		setPartitionMetadata(req, todo, floor, claimedGenMetadata(req.Generation))
		return nil
	})
	start := time.Now()
	if err := e.sess.Begin(); err != nil {
		p.stopWith(fmt.Errorf("pipeline: begin claim transaction: %w", err))
		return false
	}
	ok, err := e.sess.End(txnCtx, kgo.TryCommit)
	if err != nil {
		p.stopWith(fmt.Errorf("pipeline: claim transaction (transactional id %q): %w", p.o.TransactionalID, err))
		return false
	}
	if !ok {
		p.log.Info("claim transaction aborted (the group rebalanced); trying again")
		return false
	}
	resume := map[string][]int32{}
	p.mu.Lock()
	for key, at := range todo {
		delete(e.claimAt, key)
		if p.parts[key] != nil {
			e.claimedAt[key] = at
			resume[key.topic] = append(resume[key.topic], key.partition)
		}
	}
	p.mu.Unlock()
	cl.ResumeFetchPartitions(resume)
	if ce := p.log.Check(zap.DebugLevel, "partitions claimed"); ce != nil {
		ce.Write(zap.Int("partitions", len(todo)), zap.Duration("took", time.Since(start)))
	}
	return true
}

// setPartitionMetadata sets meta on the request's partitions of want, and
// adds those it lacks at want's offset. No offset of the request is left
// below floor, what this member's own transactions committed: after an
// aborted round franz-go can believe a partition committed lower (see
// admitLocked), and a claim or a release must not move the group's
// commit back (its records would run again, their outputs twice).
func setPartitionMetadata(req *kmsg.TxnOffsetCommitRequest, want, floor map[tp]int64, meta string) {
	seen := make(map[tp]bool, len(want))
	for i := range req.Topics {
		t := &req.Topics[i]
		for k := range t.Partitions {
			key := tp{t.Topic, t.Partitions[k].Partition}
			if f, ok := floor[key]; ok && t.Partitions[k].Offset < f {
				t.Partitions[k].Offset = f
			}
			if _, ok := want[key]; ok {
				seen[key] = true
				t.Partitions[k].Metadata = &meta
			}
		}
	}
	for key, at := range want {
		if seen[key] || at < 0 {
			continue
		}
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = key.partition, max(at, floor[key]), &meta
		added := false
		for i := range req.Topics {
			if req.Topics[i].Topic == key.topic {
				req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
				added = true
				break
			}
		}
		if !added {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = key.topic // no TopicID: franz-go sends a version that names topics
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
	}
}

// cleanLocked reports whether none of part's partner calls can still be on
// the wire: no handler runs, and no wait (the assignment's, or a cut's)
// is still running.
func (e *exactlyOnce) cleanLocked(part *partition, now time.Time) bool {
	if part.revoking || part.count.handling > 0 || part.count.inFlight > 0 || part.abandoned > 0 {
		return false
	}
	if now.Before(part.guardAfter) {
		return false
	}
	st := eosState(part)
	return st.cutAt.IsZero() || !now.Before(st.cutAt.Add(e.p.o.TakeoverWait))
}

// release commits the release marker of every clean partition, once the
// last round has ended and before the member leaves the group. It is
// best effort: a partition it does not release costs its next owner
// TakeoverWait, nothing else.
func (e *exactlyOnce) release() {
	p := e.p
	if p.o.TakeoverWait <= 0 {
		return // nobody waits: nothing to spare them
	}
	p.mu.Lock()
	failed := p.failure != nil || e.doomed || len(e.round) > 0
	now := time.Now()
	clean := map[tp]bool{}
	for key, part := range p.parts {
		if e.cleanLocked(part, now) {
			clean[key] = true
		}
	}
	p.mu.Unlock()
	if failed || len(clean) == 0 {
		return
	}
	// The committed offsets franz-go knows (the last round's, or those
	// read at the assignment); a partition polled since is in the
	// request already, at its offset.
	want := make(map[tp]int64, len(clean))
	committed := e.sess.Client().CommittedOffsets()
	p.mu.Lock()
	for key := range clean {
		want[key] = -1
		if at, ok := e.claimedAt[key]; ok {
			want[key] = at // a partition nothing was committed of but the claim
		}
		if at, ok := committed[key.topic][key.partition]; ok && at.Offset >= 0 {
			want[key] = at.Offset
		}
	}
	floor := maps.Clone(e.txnDone)
	p.mu.Unlock()
	released := map[tp]bool{}
	ctx := kgo.PreTxnCommitFnContext(p.workCtx, func(req *kmsg.TxnOffsetCommitRequest) error {
		setPartitionMetadata(req, want, floor, releasedGenMetadata(req.Generation))
		clear(released)
		for i := range req.Topics {
			for _, rp := range req.Topics[i].Partitions {
				if _, ok := want[tp{req.Topics[i].Topic, rp.Partition}]; ok {
					released[tp{req.Topics[i].Topic, rp.Partition}] = true
				}
			}
		}
		return nil
	})
	start := time.Now()
	if err := e.sess.Begin(); err != nil {
		p.log.Warn("could not begin the release transaction; the next owners wait out the takeover wait", zap.Error(err))
		return
	}
	ok, err := e.sess.End(ctx, kgo.TryCommit)
	switch {
	case err != nil:
		p.log.Warn("release transaction failed; the next owners wait out the takeover wait", zap.Error(err))
	case !ok:
		p.log.Info("release transaction aborted (the group rebalanced); the next owners wait out the takeover wait")
	default:
		parts := make([]string, 0, len(released))
		for key := range released {
			parts = append(parts, key.String())
		}
		p.log.Info("partitions released: their next owners need not wait",
			zap.Strings("partitions", parts), zap.Duration("took", time.Since(start)))
	}
}

// releaseRevoked commits, inside the revoke callback, the release marker
// of the revoked partitions none of whose partner calls can still land
// (their handlers finished, none was cut off within TakeoverWait, their
// own takeover wait is over). The session cannot end a transaction here
// (its End takes the lock the callback holds), so this is a plain offset
// commit, which the group coordinator takes only from a member of the
// current generation, as a transaction's. Its offset is the one the
// member's transactions committed: the session changes what it believes
// committed only at the end of a transaction, under that same lock, so
// either the last transaction ended before the callback (the belief is its
// offsets) or it will abort (the session saw the revocation), its pending
// offsets with it. Best effort: a partition not released costs its next
// owner TakeoverWait.
func (e *exactlyOnce) releaseRevoked(ctx context.Context, cl *kgo.Client, parts []*partition) {
	p := e.p
	if p.o.TakeoverWait <= 0 {
		return
	}
	committed := cl.CommittedOffsets()
	now := time.Now()
	offsets := map[string]map[int32]kgo.EpochOffset{}
	p.mu.Lock()
	for _, part := range parts {
		if p.parts[part.tp] != part || part.count.handling > 0 || part.abandoned > 0 || now.Before(part.guardAfter) {
			continue
		}
		if cut := eosState(part).cutAt; !cut.IsZero() && now.Before(cut.Add(p.o.TakeoverWait)) {
			continue
		}
		at := kgo.EpochOffset{Epoch: -1, Offset: -1}
		if c, ok := committed[part.topic][part.partition]; ok {
			at = c
		}
		if done, ok := e.txnDone[part.tp]; ok {
			at.Offset = max(at.Offset, done)
		}
		if claimed, ok := e.claimedAt[part.tp]; ok {
			at.Offset = max(at.Offset, claimed)
		}
		if at.Offset < 0 {
			continue // never committed, never claimed: nothing dispatched
		}
		if offsets[part.topic] == nil {
			offsets[part.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[part.topic][part.partition] = at
	}
	p.mu.Unlock()
	if len(offsets) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.DrainTimeout/2)
	defer cancel()
	ok, failed := commitWithMetadata(ctx, cl, offsets, func(gen int32, _ tp) *string {
		meta := releasedGenMetadata(gen)
		return &meta
	})
	released := make([]string, 0, len(ok))
	for key := range ok {
		released = append(released, key.String())
	}
	slices.Sort(released)
	if failed != nil {
		p.log.Info("release of revoked partitions not committed; their next owners wait out the takeover wait", zap.Error(failed))
	}
	if len(released) > 0 {
		p.log.Info("revoked partitions released: their next owners need not wait", zap.Strings("partitions", released))
	}
}
