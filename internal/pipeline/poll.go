package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
)

// pollLoop takes records while the buffer has room. With
// BlockRebalanceOnPoll no rebalance callback runs between a poll and the
// AllowRebalance after its records are queued, so a queued record always
// belongs to a live partition.
func (p *Pipeline) pollLoop(ctx context.Context) {
	var backoff time.Duration // after polls that returned only errors
	for {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		p.mu.Lock()
		var room int
		var resume map[string][]int32
		for {
			if ctx.Err() != nil {
				p.mu.Unlock()
				return
			}
			resume = p.resumableLocked()
			room = p.o.MaxBuffered - p.buffered
			if p.bytes >= p.o.MaxBufferedBytes {
				room = 0
			}
			if room > 0 || resume != nil {
				break
			}
			p.mu.Unlock()
			select {
			case <-p.wakePoll:
			case <-ctx.Done():
			}
			p.mu.Lock()
		}
		pollCtx, cancel := context.WithCancel(ctx)
		p.pollCancel = cancel
		p.mu.Unlock()

		if resume != nil {
			p.cl.ResumeFetchPartitions(resume)
			p.logPause(resume, false)
		}
		if room <= 0 {
			cancel()
			continue
		}
		fs := p.cl.PollRecords(pollCtx, room)
		cancel()
		backoff = p.pollBackoff(fs, backoff)
		pause := p.enqueue(fs, true)
		if pause != nil {
			p.cl.PauseFetchPartitions(pause)
			p.logPause(pause, true)
		}
		p.cl.AllowRebalance()
		wake(p.wakeDispatch)
	}
}

// pollBackoff logs a poll's fetch errors and returns how long to wait before
// the next poll. franz-go retries what is retriable; what it returns may come
// back at once on every poll, so back off instead of spinning and logging.
func (p *Pipeline) pollBackoff(fs kgo.Fetches, backoff time.Duration) time.Duration {
	failed := false
	fs.EachError(func(topic string, partition int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		failed = true
		p.log.Warn("fetch error", zap.String("topic", topic), zap.Int32("partition", partition), zap.Error(err))
	})
	switch {
	case !failed || fs.NumRecords() > 0:
		return 0
	case backoff == 0:
		return 100 * time.Millisecond
	default:
		return min(2*backoff, 5*time.Second)
	}
}

// resumableLocked returns the paused partitions whose buffer drained to half,
// marking them resumed.
func (p *Pipeline) resumableLocked() map[string][]int32 {
	var resume map[string][]int32
	for _, part := range p.parts {
		if part.paused && p.drainedLocked(part) {
			part.paused = false
			if resume == nil {
				resume = make(map[string][]int32)
			}
			resume[part.topic] = append(resume[part.topic], part.partition)
		}
	}
	return resume
}

// enqueue hands polled records to their partitions' strategy and, when
// pausing, returns the partitions whose buffer is full, to pause. A poll
// that is a round (exactly-once) pauses nothing: it takes at most
// MaxBuffered, and the next poll waits for the round.
func (p *Pipeline) enqueue(fs kgo.Fetches, pausing bool) map[string][]int32 {
	var pause map[string][]int32
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pollCancel = nil
	n := 0
	fs.EachRecord(func(r *kgo.Record) {
		key := tp{r.Topic, r.Partition}
		part := p.parts[key]
		if part == nil { // not announced by onAssigned; adopt it
			part = p.newPartitionLocked(key)
		}
		if r.Offset <= part.last {
			p.log.Warn("record offset went backwards; skipped", zap.String("topic", r.Topic),
				zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset), zap.Int64("last", part.last))
			return
		}
		j := &job{p: part, rec: r}
		admitted := p.mode.admitLocked(part, j)
		part.last = r.Offset
		if !admitted {
			return
		}
		j.promise = j.onAck(p)
		size := recordSize(r)
		part.track.AddSized(r.Offset, r.LeaderEpoch, size)
		p.buffered++
		p.bytes += size
		n++
		if !pausing {
			return
		}
		if !part.paused && (part.track.Len() >= p.o.MaxBufferedPerPartition || part.track.Bytes() >= p.o.MaxBufferedBytes/2) {
			part.paused = true
			if pause == nil {
				pause = make(map[string][]int32)
			}
			pause[part.topic] = append(pause[part.topic], part.partition)
		}
	})
	if n > 0 {
		p.obs.InFlight(p.count.inFlight, p.buffered)
	}
	return pause
}

// drainedLocked reports whether a paused partition's buffer drained
// enough to fetch it again: to half its record bound and a quarter of the
// byte bound (a partition may take half).
func (p *Pipeline) drainedLocked(part *partition) bool {
	return part.track.Len() <= p.o.MaxBufferedPerPartition/2 && part.track.Bytes() <= p.o.MaxBufferedBytes/4
}

// recordSize is what a buffered record is counted as against
// MaxBufferedBytes: its key, value and headers, and a fixed allowance for
// the record, job and bookkeeping structures around them.
func recordSize(r *kgo.Record) int {
	n := recordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// recordOverhead approximates a buffered record's memory besides its bytes:
// the kgo.Record, the job, scheduler and tracker entries.
const recordOverhead = 512

// logPause logs at debug level: under a backlog, pausing and resuming is
// routine flow control that happens many times a second.
func (p *Pipeline) logPause(tps map[string][]int32, paused bool) {
	msg := "partitions resumed"
	if paused {
		msg = "partitions paused: buffer full"
	}
	for topic, parts := range tps {
		p.log.Debug(msg, zap.String("topic", topic), zap.Int32s("partitions", parts))
		for _, part := range parts {
			p.obs.Paused(topic, part, paused)
		}
	}
}

func (p *Pipeline) newPartitionLocked(key tp) *partition {
	ctx, cancel := context.WithCancel(p.workCtx)
	part := &partition{
		tp:      key,
		ctx:     ctx,
		cancel:  cancel,
		sched:   ordering.NewScheduler[*job](p.o.Mode),
		last:    -1,
		maxSent: -1,
	}
	p.assigned++
	part.assignment = p.assigned
	p.mode.openLocked(part)
	p.parts[key] = part
	return part
}
