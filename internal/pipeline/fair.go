package pipeline

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Shares in exactly-once rounds. franz-go's poll takes buffered records
// partition by partition, in the order they were fetched, and a fetch
// carries up to 256 KiB of each partition (a whole producer batch if that
// is larger): thousands of records. A round smaller than that, polled at
// once, takes its records from the first partition only, and round after
// round does the same until that partition's fetched records are used up,
// while the member's other partitions wait, fetched and unread. In a
// rolling restart the new owner of three partitions ran 750 records of one
// before the first of another (8.5 s). At-least-once mode takes whole polls
// of MaxBuffered and runs every partition at once.
//
// Until 2026-11-28 rounds took turns: a round full of lagging partitions
// paused them for the next round. With three partitions each then waited
// two rounds (about a second each) between its turns, and a rolling
// restart under exactly-once left a partition without results for 5.9–9.7
// s against at-least-once's 3.1–3.6 s. Now one round takes a share of
// each: it polls at most limit ÷ k records at a time, k the partitions
// that may lag, and after each poll pauses the partitions it took from
// that still lag, so that the next poll of the round takes the others'
// records; the round's pauses are lifted once it has polled. franz-go
// drops what it holds of a paused partition and fetches it again once it
// is resumed, while the round runs. A partition whose lag is not known
// (not polled since its assignment) gets turnPollWait to show records;
// if it had none it is known to be caught up until a poll shows otherwise.
// Partitions known to be caught up are not waited for: a round of live
// traffic is one poll, as before, and its results are not held back by
// polls for records that are yet to come.

// fetchMaxWait is the consumer's FetchMaxWait (see New).
const fetchMaxWait = 250 * time.Millisecond

// turnPollWait bounds a round's polls after its first, for partitions
// that may lag and have not had their share yet: a fetch of theirs
// answers within fetchMaxWait when they have nothing.
const turnPollWait = 2 * fetchMaxWait

// turns is the exactly-once mode's record of what each partition lags;
// guarded by Pipeline.mu, but used only by the round loop and the
// revocation's drop.
type turns struct {
	// lag is, per partition polled since its assignment, how many
	// records its last poll left behind (by its fetch's last stable
	// offset); a partition not in it has not been polled yet.
	lag map[tp]int64
	// paused: partitions paused while the round polls, having had their
	// share of it.
	paused map[tp]bool
}

// pollRound polls the round's records, at most limit, and queues them as
// they come: a share of each partition that may lag (see above). ctx ends
// the first poll (the claim's context); the round's later polls end
// turnPollWait after it, so that partitions with nothing to show, or a
// trickle of live records meanwhile, hold its start back no longer.
func (e *exactlyOnce) pollRound(ctx context.Context, limit int) kgo.Fetches {
	p := e.p
	cl := e.sess.Client()
	taken := map[tp]int{}
	first := limit
	p.mu.Lock()
	if len(p.parts) == 0 {
		// Nothing assigned yet (a member's start, or after losing all):
		// the first poll waits for the assignment, and its share is not
		// known until then.
		first = 1
	}
	p.mu.Unlock()
	fs := e.sess.PollRecords(ctx, min(first, e.share(limit)))
	total := e.queue(fs, taken)
	probed := first == 1 && total == 1
	deadline := time.Now().Add(turnPollWait)
	for total < limit && ctx.Err() == nil {
		share := e.share(limit)
		p.mu.Lock()
		if e.doomed {
			p.mu.Unlock()
			break
		}
		waiting := e.mayLagLocked(taken)
		if len(waiting) == 0 && (!probed || total >= share) {
			// Nobody waits: a round of live traffic is what the first
			// poll found, not held back for records yet to come. Only
			// the probe's partition takes the rest of its share.
			p.mu.Unlock()
			break
		}
		pause := map[string][]int32{}
		for key, n := range taken {
			if n >= share && e.turns.lag[key] > 0 && !e.turns.paused[key] && p.parts[key] != nil {
				e.turns.paused[key] = true
				pause[key.topic] = append(pause[key.topic], key.partition)
			}
		}
		var pausedNames, waitingNames []string
		if len(pause) > 0 && p.log.Core().Enabled(zap.DebugLevel) {
			pausedNames, waitingNames = tpStrings(slices.Collect(maps.Keys(e.turns.paused))), tpStrings(waiting)
		}
		p.mu.Unlock()
		if len(pause) > 0 {
			cl.PauseFetchPartitions(pause)
			p.log.Debug("partitions paused for the round: they had their share, others wait", zap.Strings("paused", pausedNames), zap.Strings("waiting", waitingNames))
		}
		pollCtx, cancel := context.WithDeadline(ctx, deadline)
		n := 0
		for n == 0 && pollCtx.Err() == nil {
			// A poll can come back empty before the deadline: a fetch
			// of a partition just paused arrived and was dropped, or
			// the waiting partitions' fetch is still out. Only the
			// deadline says they had nothing (one in 20 loaded runs of
			// TestExactlyOnceRoundsTakeTurns waited every round).
			more := e.sess.PollRecords(pollCtx, min(share, limit-total))
			n = e.queue(more, taken)
			fs = append(fs, withoutContextErrors(more)...)
		}
		expired := pollCtx.Err() != nil && ctx.Err() == nil
		cancel()
		if n == 0 {
			if expired {
				p.mu.Lock()
				for _, key := range waiting {
					e.turns.lag[key] = 0 // given its share, it had nothing
				}
				p.mu.Unlock()
			}
			break
		}
		total += n
	}
	p.mu.Lock()
	resume := e.endSharesLocked()
	p.mu.Unlock()
	if len(resume) > 0 {
		cl.ResumeFetchPartitions(resume)
	}
	return fs
}

// share is what a round of limit records takes of each partition that
// may lag, at least one.
func (e *exactlyOnce) share(limit int) int {
	e.p.mu.Lock()
	k := len(e.mayLagLocked(nil))
	e.p.mu.Unlock()
	if k <= 1 {
		return limit
	}
	return (limit + k - 1) / k
}

// queue hands a poll's records to the pipeline, records what it says of
// each partition's lag, counts the records it took of each partition in
// taken, wakes the dispatcher and returns how many records it held.
func (e *exactlyOnce) queue(fs kgo.Fetches, taken map[tp]int) int {
	p := e.p
	p.enqueue(fs, false)
	n := 0
	p.mu.Lock()
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if fp.Err != nil {
			return
		}
		key := tp{fp.Topic, fp.Partition}
		if p.parts[key] == nil {
			return
		}
		end := fp.HighWatermark
		if fp.LastStableOffset >= 0 {
			end = min(end, fp.LastStableOffset)
		}
		if len(fp.Records) == 0 {
			// Fetched at its position and nothing there: caught up, or
			// only markers and aborted records left before end.
			e.turns.lag[key] = 0
			return
		}
		taken[key] += len(fp.Records)
		n += len(fp.Records)
		e.turns.lag[key] = max(0, end-fp.Records[len(fp.Records)-1].Offset-1)
	})
	p.mu.Unlock()
	if n > 0 {
		wake(p.wakeDispatch)
	}
	return n
}

// mayLagLocked lists the member's partitions that may have records to
// poll, but for those in taken (nil: all): polled since their assignment
// with records left behind, or not polled yet. Partitions whose committed
// offset is not read or whose claim is not committed are paused, not
// waiting; those paused for their share are counted only with taken nil.
func (e *exactlyOnce) mayLagLocked(taken map[tp]int) []tp {
	var keys []tp
	for key := range e.p.parts {
		if _, took := taken[key]; took || e.inheriting[key] || (taken != nil && e.turns.paused[key]) {
			continue
		}
		if _, claiming := e.claimAt[key]; claiming {
			continue
		}
		if lag, known := e.turns.lag[key]; !known || lag > 0 {
			keys = append(keys, key)
		}
	}
	return keys
}

// withoutContextErrors drops the error fetch a poll returns when its own
// bound ended it: that is how a share's poll ends, not a fetch error.
func withoutContextErrors(fs kgo.Fetches) kgo.Fetches {
	out := fs[:0:0]
	for _, f := range fs {
		if len(f.Topics) == 1 && len(f.Topics[0].Partitions) == 1 {
			fp := f.Topics[0].Partitions[0]
			if len(fp.Records) == 0 && (errors.Is(fp.Err, context.DeadlineExceeded) || errors.Is(fp.Err, context.Canceled)) {
				continue
			}
		}
		out = append(out, f)
	}
	return out
}

// forgetTurnsLocked drops what the turns knew of part, which is being
// dropped: a partition paused for its share is marked paused, so that the
// drop resumes it (a pause outlives the assignment).
func (e *exactlyOnce) forgetTurnsLocked(part *partition) {
	t := &e.turns
	if t.paused[part.tp] {
		part.paused = true
	}
	delete(t.paused, part.tp)
	delete(t.lag, part.tp)
}

func tpStrings(keys []tp) []string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	slices.Sort(s)
	return s
}

// endSharesLocked ends the round's shares and returns the partitions
// paused for them that are still this member's and not waiting for their
// claim (claim resumes those), to resume.
func (e *exactlyOnce) endSharesLocked() map[string][]int32 {
	t := &e.turns
	resume := map[string][]int32{}
	for key := range t.paused {
		if _, claiming := e.claimAt[key]; e.p.parts[key] != nil && !claiming {
			resume[key.topic] = append(resume[key.topic], key.partition)
		}
	}
	clear(t.paused)
	return resume
}
