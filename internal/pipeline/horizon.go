package pipeline

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// The dispatch horizon (at-least-once mode). A record is dispatched, and so
// may reach the partner, only once its offset is below its partition's
// horizon, and the horizon is durable before it moves: it travels in the
// metadata of the partition's committed offset. The next owner of the
// partition reads it back and marks Fresh exactly the records between the
// committed offset and the horizon: the only ones a previous owner can have
// sent without committing. Everything after the horizon is new.
//
// The horizon moves ahead in steps (HorizonStep records past the highest
// taken offset, asked for when less than half a step is left), so it costs
// one offset commit per half step of each partition, not one per record. A
// clean stop lowers it to just past the highest dispatched offset, so that
// a rebalance after a drain guards only what is truly uncertain.

// horizonPrefix starts the offset commit metadata this package writes.
// Metadata written by anything else (an older bridge, an offsets tool,
// franz-go's member ID) is not a horizon.
const horizonPrefix = "loyalty-bridge/horizon="

// releasedSuffix ends the metadata of a final commit made when none of the
// member's handlers of the partition was cut off: no partner call of its
// can still be on its way, so the next owner need not wait before its
// guard's lookups (the takeover wait, below). A crash leaves a periodic commit's
// metadata, without it.
const releasedSuffix = "/released"

func horizonMetadata(h int64) string { return horizonPrefix + strconv.FormatInt(h, 10) }

func releasedMetadata(h int64) string { return horizonMetadata(h) + releasedSuffix }

// parseHorizon reads a horizon from offset commit metadata, and whether
// the partition was released cleanly; ok is false when the metadata is not
// a horizon (anything but exactly what horizonMetadata or releasedMetadata
// writes).
func parseHorizon(meta string) (h int64, released, ok bool) {
	s, ok := strings.CutPrefix(meta, horizonPrefix)
	if !ok {
		return 0, false, false
	}
	s, released = strings.CutSuffix(s, releasedSuffix)
	h, err := strconv.ParseInt(s, 10, 64)
	// Only the spelling horizonMetadata writes: "+5", "007" or "-0" were
	// written by something else, and are not ours to trust.
	if err != nil || h < 0 || strconv.FormatInt(h, 10) != s {
		return 0, false, false
	}
	return h, released, true
}

// The takeover wait. The horizon says which records a previous owner may
// have sent, not when its last partner call has landed. A member that
// crashed, was expelled, or cut its handlers off at a drain timeout may
// have a call on its way when the partition is assigned here; a lookup
// made before that call lands finds nothing, and the guarded record is
// written a second time. So the guarded records of a partition not
// released cleanly wait TakeoverWait (by default the partner call's
// attempt timeout plus DefaultTakeoverMargin) from the assignment before
// they are dispatched. The previous owner stopped starting calls before
// the assignment (a cut-off handler's calls end with its context; an
// expelled member's with its lease, package lease), and a call it started
// lands, by assumption, within its attempt timeout of being sent or never.
// The partition's other records wait too (simpler than letting records
// after the horizon, never sent, overtake: the wait follows only an
// unclean takeover, rare next to rebalances after a drain).

// fetched is a partition's committed offset (-1: none) and its metadata.
type fetched struct {
	at   int64
	meta *string
}

// fetchedOffsets reads an offset fetch's answer, partitions with an error
// left out (franz-go retries or reports it; the partition stays unknown).
func fetchedOffsets(resp *kmsg.OffsetFetchResponse) map[tp]fetched {
	got := map[tp]fetched{}
	add := func(topic string, ps []kmsg.OffsetFetchResponseTopicPartition) {
		for _, rp := range ps {
			if kerr.ErrorForCode(rp.ErrorCode) != nil {
				continue
			}
			got[tp{topic, rp.Partition}] = fetched{rp.Offset, rp.Metadata}
		}
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			ps := make([]kmsg.OffsetFetchResponseTopicPartition, 0, len(t.Partitions))
			for _, gp := range t.Partitions {
				ps = append(ps, kmsg.OffsetFetchResponseTopicPartition{Partition: gp.Partition, Offset: gp.Offset, Metadata: gp.Metadata, ErrorCode: gp.ErrorCode})
			}
			add(t.Topic, ps)
		}
	}
	for _, t := range resp.Topics {
		add(t.Topic, t.Partitions)
	}
	return got
}

// onFetched learns, for each newly assigned partition, its committed offset
// and the horizon its previous owner left, before franz-go starts fetching
// it: records below that horizon are Fresh. A partition with no commit was
// never dispatched by a member that keeps a horizon; one whose commit
// carries no horizon was committed by something else, and gets the old
// guess, a buffer's worth of Fresh records.
func (a *atLeastOnce) onFetched(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	p := a.p
	got := fetchedOffsets(resp)
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, f := range got {
		part := p.parts[key]
		if part == nil || hz(part).known {
			continue
		}
		st := hz(part)
		st.known = true
		switch h, released, ok := parseHorizon(deref(f.meta)); {
		case f.at < 0:
			// Nothing committed: nothing dispatched by a member of this
			// version, which commits a horizon before its first dispatch.
		case ok:
			st.committed = f.at
			st.guardBelow = h
			if h > f.at {
				var wait time.Duration
				if !released {
					wait = p.o.TakeoverWait
					p.guardUntilLocked(part, time.Now().Add(wait))
				}
				p.log.Info("partition assigned with uncertain records: those up to the previous owner's dispatch horizon are guarded",
					zap.String("topic", key.topic), zap.Int32("partition", key.partition),
					zap.Int64("committed", f.at), zap.Int64("horizon", h), zap.Int64("guarded", h-f.at),
					zap.Bool("released", released), zap.Duration("guarded_wait", wait))
			}
		default:
			st.committed = f.at
			st.fresh = p.o.MaxBufferedPerPartition
			p.log.Info("committed offset carries no dispatch horizon (committed by an older version or another tool); guarding a buffer's worth of records",
				zap.String("topic", key.topic), zap.Int32("partition", key.partition),
				zap.Int64("committed", f.at), zap.Int("guarded", st.fresh))
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// advancedLocked makes a horizon that became durable effective: the held
// records below it are scheduled.
func (a *atLeastOnce) advancedLocked(part *partition, h int64) {
	st := hz(part)
	if h <= st.horizon {
		return
	}
	st.horizon = h
	n := 0
	for _, j := range st.held {
		if j.rec.Offset >= h {
			break
		}
		part.sched.Push(j.rec.Offset, j.rec.Key, j)
		n++
	}
	if n > 0 {
		clear(st.held[:n])
		st.held = st.held[n:]
		wake(a.p.wakeDispatch)
	}
}

// commitLoop commits the live partitions' commit points every
// CommitInterval, and at once when a horizon must move. It replaces
// franz-go's autocommit, which cannot carry metadata.
func (a *atLeastOnce) commitLoop(ctx context.Context, cl *kgo.Client) {
	p := a.p
	tick := time.NewTicker(p.o.CommitInterval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-tick.C:
		case <-a.wakeCommit:
		case <-ctx.Done():
			return
		}
		err := a.commit(ctx, cl, nil)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			p.log.Warn("offset commit failing; records past the dispatch horizon wait for it, the others are processed and committed later",
				zap.Error(err))
		case err == nil && failing:
			failing = false
			p.log.Info("offset commits succeed again")
		}
	}
}

// commit commits, for the partitions in only (nil: every live partition
// not being revoked), their commit points with their horizons, and makes
// the horizons that became durable effective. With only set it is a final
// commit of partitions that dispatch no more: their horizon is lowered to
// just past the highest offset dispatched.
func (a *atLeastOnce) commit(ctx context.Context, cl *kgo.Client, only []*partition) error {
	p := a.p
	a.commitMu.Lock()
	defer a.commitMu.Unlock()

	type sent struct {
		part     *partition
		at       int64
		horizon  int64
		released bool
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	sending := map[tp]sent{}
	add := func(part *partition, final bool) {
		st := hz(part)
		at, epoch, ok := part.track.Commit()
		if !ok {
			at, epoch = st.committed, -1
		}
		if at < 0 {
			return // nothing taken yet: nothing to say
		}
		// Never below the horizon this member inherited: records a
		// previous owner may have sent, and this one has not finished,
		// stay uncertain for the next owner whatever this one did (a
		// member taking a crashed one's partition and handing it on after
		// a few records once lowered it to its own last dispatch, and the
		// third owner wrote records the first had applied).
		h := max(st.horizon, st.want, st.guardBelow)
		// Released: no handler of the partition is running or was cut
		// off, so none of its partner calls can still land, and so none
		// of a previous owner's: this member's takeover wait, if it had
		// one, is over.
		released := false
		if final {
			h = max(at, part.maxSent+1, st.guardBelow)
			released = part.count.handling == 0 && part.abandoned == 0 && !time.Now().Before(part.guardAfter)
		}
		if at == st.sentAt && h == st.sentHorizon && released == st.sentReleased {
			return
		}
		if offsets[part.topic] == nil {
			offsets[part.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[part.topic][part.partition] = kgo.EpochOffset{Epoch: epoch, Offset: at}
		sending[part.tp] = sent{part, at, h, released}
	}
	p.mu.Lock()
	if only == nil {
		for _, part := range p.parts {
			if !part.revoking {
				add(part, false)
			}
		}
	} else {
		for _, part := range only {
			add(part, true)
		}
	}
	p.mu.Unlock()
	if len(sending) == 0 {
		return nil
	}

	ok, failed := commitWithMetadata(ctx, cl, offsets, func(_ int32, key tp) *string {
		s, ok := sending[key]
		if !ok {
			return nil
		}
		meta := horizonMetadata(s.horizon)
		if s.released {
			meta = releasedMetadata(s.horizon)
		}
		return &meta
	})

	p.mu.Lock()
	defer p.mu.Unlock()
	for key, s := range sending {
		if !ok[key] || p.parts[key] != s.part && only == nil {
			continue
		}
		st := hz(s.part)
		st.sentAt, st.sentHorizon, st.sentReleased = s.at, s.horizon, s.released
		if only == nil {
			a.advancedLocked(s.part, s.horizon)
		}
	}
	return failed
}

// commitWithMetadata commits offsets with the metadata meta gives each
// partition of the request (nil: left as franz-go sets it), and reports
// the partitions the coordinator took and the last error, of the request
// or of a partition.
func commitWithMetadata(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset,
	meta func(generation int32, key tp) *string) (map[tp]bool, error) {
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			t := &req.Topics[i]
			for k := range t.Partitions {
				if m := meta(req.Generation, tp{t.Topic, t.Partitions[k].Partition}); m != nil {
					t.Partitions[k].Metadata = m
				}
			}
		}
		return nil
	})
	var failed error
	ok := map[tp]bool{}
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			failed = err
			return
		}
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				if perr := kerr.ErrorForCode(rp.ErrorCode); perr != nil {
					failed = perr
					continue
				}
				ok[tp{t.Topic, rp.Partition}] = true
			}
		}
	})
	return ok, failed
}
