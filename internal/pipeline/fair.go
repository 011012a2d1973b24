package pipeline

import (
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Turns in exactly-once rounds. franz-go's poll takes buffered records
// partition by partition, in the order they were fetched, and a fetch
// carries up to 256 KiB of each partition (a whole producer batch if that
// is larger): thousands of records. A round smaller than that takes its
// records from the first partition only, and round after round does the
// same until that partition's fetched records are used up, while the
// member's other partitions wait, fetched and unread. In a rolling restart
// the new owner of three partitions ran 750 records of one before the first
// of another (8.5 s). At-least-once mode takes whole polls of MaxBuffered
// and runs every partition at once; it has no turns to take.
//
// So a round whose poll was full of partitions that still lag, while
// another partition of the member may have records waiting (it lagged when
// last polled, or has not been polled since it was assigned), pauses the
// lagging ones for the next poll: franz-go drops what it holds of them and
// fetches it again once they are resumed, after that poll. The next round
// then takes the waiting partitions' records. If they had none after all,
// that poll ends after turnPollWait with nothing, and they are known to be
// caught up until a poll shows otherwise. The cost is a fetch of the paused
// partitions' records again, at most once a round.

// fetchMaxWait is the consumer's FetchMaxWait (see New).
const fetchMaxWait = 250 * time.Millisecond

// turnPollWait bounds a poll that gives waiting partitions their turn: a
// fetch of theirs answers within fetchMaxWait when they have nothing.
const turnPollWait = 2 * fetchMaxWait

// turns is the exactly-once mode's record of whose turn it is; guarded by
// Pipeline.mu, but used only by the round loop and the revocation's drop.
type turns struct {
	// lag is, per partition polled since its assignment, how many
	// records its last poll left behind (by its fetch's last stable
	// offset); a partition not in it has not been polled yet.
	lag map[tp]int64
	// paused: partitions paused to give others their turn; awaited: the
	// partitions whose turn it is.
	paused  map[tp]bool
	awaited map[tp]bool
}

// turnPoll bounds the next poll, when partitions are paused for others'
// turn (turn), to turnPollWait: cancel ends it (expired then reports
// true); stop ends the bound.
func (e *exactlyOnce) turnPoll(cancel func()) (stop func(), expired func() bool, turn bool) {
	e.p.mu.Lock()
	waiting := len(e.turns.paused) > 0
	e.p.mu.Unlock()
	if !waiting {
		return func() {}, func() bool { return false }, false
	}
	var fired atomic.Bool
	t := time.AfterFunc(turnPollWait, func() {
		fired.Store(true)
		cancel()
	})
	return func() { t.Stop() }, fired.Load, true
}

// takeTurns, after a poll of at most limit records and before the group
// may rebalance, records what the poll says of each partition's lag,
// resumes the partitions paused for this poll, and pauses the partitions
// that filled it if another may be waiting. expired: the poll ended by
// turnPollWait.
func (e *exactlyOnce) takeTurns(fs kgo.Fetches, limit int, expired bool) {
	p := e.p
	cl := e.sess.Client()
	t := &e.turns
	polled := map[tp]bool{}
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
			t.lag[key] = 0
			return
		}
		polled[key] = true
		n += len(fp.Records)
		t.lag[key] = max(0, end-fp.Records[len(fp.Records)-1].Offset-1)
	})
	if expired && n == 0 {
		for key := range t.awaited {
			t.lag[key] = 0 // given a turn, it had nothing
		}
	}
	resume := e.endTurnLocked()
	pause := map[string][]int32{}
	if n >= limit {
		for key := range p.parts {
			if polled[key] || e.inheriting[key] {
				continue
			}
			if _, claiming := e.claimAt[key]; claiming {
				continue
			}
			if lag, known := t.lag[key]; !known || lag > 0 {
				t.awaited[key] = true
			}
		}
		if len(t.awaited) > 0 {
			for key := range polled {
				if t.lag[key] > 0 {
					t.paused[key] = true
					pause[key.topic] = append(pause[key.topic], key.partition)
				}
			}
		}
		if len(t.paused) == 0 {
			clear(t.awaited)
		}
	}
	var paused, waiting []string
	if len(pause) > 0 && p.log.Core().Enabled(zap.DebugLevel) {
		paused, waiting = tpStrings(slices.Collect(maps.Keys(t.paused))), tpStrings(slices.Collect(maps.Keys(t.awaited)))
	}
	p.mu.Unlock()
	if len(resume) > 0 {
		cl.ResumeFetchPartitions(resume)
	}
	if len(pause) > 0 {
		cl.PauseFetchPartitions(pause)
		p.log.Debug("partitions paused for a round: others wait their turn", zap.Strings("paused", paused), zap.Strings("waiting", waiting))
	}
}

// forgetTurnsLocked drops what the turns knew of part, which is being
// dropped: a partition paused for others' turn is marked paused, so that
// the drop resumes it (a pause outlives the assignment).
func (e *exactlyOnce) forgetTurnsLocked(part *partition) {
	t := &e.turns
	if t.paused[part.tp] {
		part.paused = true
	}
	delete(t.paused, part.tp)
	delete(t.awaited, part.tp)
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

// skipTurn gives back the turn of a round that aborted: the partitions
// paused for others are resumed at once, since the round that paused them
// answered nothing (its records are taken again).
func (e *exactlyOnce) skipTurn() {
	p := e.p
	p.mu.Lock()
	resume := e.endTurnLocked()
	p.mu.Unlock()
	if len(resume) > 0 {
		e.sess.Client().ResumeFetchPartitions(resume)
	}
}

// endTurnLocked ends the current turn and returns the partitions paused
// for it that are still this member's and not waiting for their claim
// (claim resumes those), to resume.
func (e *exactlyOnce) endTurnLocked() map[string][]int32 {
	t := &e.turns
	resume := map[string][]int32{}
	for key := range t.paused {
		if _, claiming := e.claimAt[key]; e.p.parts[key] != nil && !claiming {
			resume[key.topic] = append(resume[key.topic], key.partition)
		}
	}
	clear(t.paused)
	clear(t.awaited)
	return resume
}
