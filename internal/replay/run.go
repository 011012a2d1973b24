package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
)

// source emits the records to replay, in offset order per partition, and
// returns when it has emitted them all (or emit failed, or ctx ended).
type source func(ctx context.Context, emit func(*kgo.Record) error) error

// result is what handling one record came to.
type result struct {
	label string // the summary's outcome
	line  string // a dry run's line
	retry bool   // ended in a retryable error event, or its output was not produced
	gone  bool   // abandoned: the context ended before the record reached an output
}

type done struct {
	part *lane
	task ordering.Task[*kgo.Record]
	res  result
}

// tp names a partition.
type tp struct {
	topic     string
	partition int32
}

// lane is one source partition's scheduler.
type lane struct {
	tp    tp
	sched *ordering.Scheduler[*kgo.Record]
	last  int64 // offset pushed last
}

// run replays what src emits. One goroutine (this one) owns the
// schedulers, the summary and the progress calls; records are read ahead
// up to MaxBuffered, started at Rate up to MaxInFlight at once, and each
// record's outputs are acknowledged before it counts as done. When ctx
// ends, nothing more starts; records in flight get DrainTimeout to finish.
// When the replay gives up (MaxWait, FailFast), nothing more starts and
// records in flight are abandoned at once: they wait on a partner that is
// failing, and a later replay guards them as it guards every record.
func (r *Replayer) run(ctx context.Context, planned int, src source, sum *Summary) error {
	sum.Planned = planned
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()

	in := make(chan *kgo.Record)
	var srcErr error
	srcDone := make(chan struct{})
	go func() {
		defer close(srcDone)
		defer close(in)
		srcErr = src(sctx, func(rec *kgo.Record) error {
			select {
			case in <- rec:
				return nil
			case <-sctx.Done():
				return sctx.Err()
			}
		})
	}()

	var limiter *rate.Limiter
	if r.o.Rate > 0 {
		limiter = rate.NewLimiter(rate.Limit(r.o.Rate), 1)
	}
	var (
		lanes    = map[tp]*lane{}
		order    []*lane // round robin among partitions
		next     int
		waiting  int
		inflight int
		read     int
		closed   bool
		stopping bool
		drain    <-chan time.Time
		results  = make(chan done, r.o.MaxInFlight)
		wg       sync.WaitGroup
		stop     = ctx.Done()
		lastDone = r.o.Now()
		ticks    <-chan time.Time
	)
	if r.o.Progress != nil || r.o.MaxWait > 0 || r.o.FailFast {
		t := time.NewTicker(r.o.Tick)
		defer t.Stop()
		ticks = t.C
	}
	giveUp := func(why string) {
		sum.GaveUp = why
		r.log.Info("replay: giving up; the records not finished are not replayed", zap.String("why", why),
			zap.Int("in_flight", inflight), zap.Int("not_started", waiting))
		stopping, stop, drain = true, nil, nil
		hcancel()
	}
	take := func() (*lane, ordering.Task[*kgo.Record], bool) {
		for i := range order {
			l := order[(next+i)%len(order)]
			if t, ok := l.sched.Next(); ok {
				next = (next + i + 1) % len(order)
				return l, t, true
			}
		}
		return nil, ordering.Task[*kgo.Record]{}, false
	}
	finish := func(d done) {
		d.part.sched.Done(d.task)
		if d.res.gone {
			return
		}
		sum.count(d.res)
		lastDone = r.o.Now()
		if d.res.line != "" {
			fmt.Fprintln(r.o.Out, d.res.line)
		}
		if r.o.Progress != nil {
			r.o.Progress(Progress{Done: sum.Records, Planned: sum.Planned})
		}
		if d.res.retry && r.o.FailFast && !stopping {
			giveUp("a record ended in a retryable error again (" + d.res.label + "), and --fail-fast")
		}
	}
	tick := func(now time.Time) {
		p := Progress{Done: sum.Records, Planned: sum.Planned, Tick: true, Idle: now.Sub(lastDone), tick: r.o.Tick}
		var held bool
		if r.o.WaitingFor != nil {
			p.Waiting, held = r.o.WaitingFor(now)
		}
		if r.o.Progress != nil {
			r.o.Progress(p)
		}
		if stopping {
			return
		}
		switch {
		case r.o.FailFast && held:
			giveUp(p.Waiting + ", and --fail-fast")
		case r.o.MaxWait > 0 && p.Idle >= r.o.MaxWait:
			why := p.Waiting
			if why == "" {
				why = "waiting for the partner's answers"
			}
			giveUp(fmt.Sprintf("no record finished for %s (--max-wait %s): %s", roundIdle(p.Idle), r.o.MaxWait, why))
		}
	}
	// A record taken but not yet due under Rate waits here, on a timer the
	// loop selects on, so that ticks and interruptions are served while
	// the replay is paced.
	var (
		paced    func()
		pace     *time.Timer
		paceDue  <-chan time.Time
		unpace   func()
		startRec = func(l *lane, t ordering.Task[*kgo.Record]) {
			wg.Go(func() { results <- done{part: l, task: t, res: r.process(hctx, t.Value)} })
		}
	)
	for {
		for !stopping && paced == nil && inflight < r.o.MaxInFlight {
			l, t, ok := take()
			if !ok {
				break
			}
			waiting--
			inflight++
			if limiter != nil {
				if res := limiter.Reserve(); res.Delay() > 0 {
					paced = func() { startRec(l, t) }
					unpace = func() { // it never started
						res.Cancel()
						inflight--
						waiting++
						l.sched.Done(t)
					}
					pace = time.NewTimer(res.Delay())
					paceDue = pace.C
					break
				}
			}
			startRec(l, t)
		}
		if stopping && paced != nil {
			pace.Stop()
			unpace()
			paced, paceDue = nil, nil
		}
		if inflight == 0 && (stopping || closed && waiting == 0) {
			break
		}
		var recv <-chan *kgo.Record
		if !closed && !stopping && waiting < r.o.MaxBuffered {
			recv = in
		}
		select {
		case rec, ok := <-recv:
			if !ok {
				closed = true
				if srcErr == nil {
					sum.Planned = read
				}
				continue
			}
			k := tp{rec.Topic, rec.Partition}
			l := lanes[k]
			if l == nil {
				l = &lane{tp: k, sched: ordering.NewScheduler[*kgo.Record](r.o.Mode), last: -1}
				lanes[k] = l
				order = append(order, l)
			}
			if rec.Offset <= l.last {
				continue // a source emits each offset once, in order; never run one twice
			}
			l.last = rec.Offset
			l.sched.Push(rec.Offset, rec.Key, rec)
			waiting++
			read++
		case d := <-results:
			inflight--
			finish(d)
		case <-stop:
			stopping, stop = true, nil
			drain = time.After(r.o.DrainTimeout)
		case <-drain:
			r.log.Warn("replay: abandoning records still in flight after the drain timeout", zap.Int("records", inflight))
			hcancel()
			drain = nil
		case <-ticks:
			tick(r.o.Now())
		case <-paceDue:
			paced()
			paced, paceDue = nil, nil
		}
	}
	wg.Wait()
	scancel()
	<-srcDone
	if sum.GaveUp != "" {
		return nil // what was not replayed is in the summary; srcErr is the cancelled read
	}
	if stopping || srcErr != nil {
		sum.Interrupted = true
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return srcErr
}

// process handles one record: the bridge's handler in replay mode, its
// outputs produced and acknowledged (or, in a dry run, what would be done).
func (r *Replayer) process(ctx context.Context, rec *kgo.Record) result {
	if r.o.DryRun {
		return r.dryRun(ctx, rec)
	}
	pos := events.SourceID(rec.Topic, rec.Partition, rec.Offset)
	out, err := r.o.Handle(ctx, rec, pipeline.Meta{Fresh: true})
	if err != nil {
		if ctx.Err() != nil {
			return result{gone: true}
		}
		if out, err = r.o.Fallback(rec, err); err != nil {
			r.log.Error("replay: no output for a record", zap.String("record", pos), zap.Error(err))
			return result{label: "no output (handler and fallback failed)", retry: true}
		}
	}
	res := r.label(ctx, out)
	if len(out) > 0 {
		if err := r.cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
			if ctx.Err() != nil {
				return result{gone: true}
			}
			r.log.Error("replay: output not produced", zap.String("record", pos), zap.Error(err))
			res.label += " (not produced)"
			res.retry = true
		}
	}
	return res
}

// label is the outcome the first output carries.
func (r *Replayer) label(ctx context.Context, out []*kgo.Record) result {
	if len(out) == 0 {
		return result{label: "no output"}
	}
	v, err := r.o.Codec.Decode(ctx, out[0].Topic, out[0].Value)
	if err != nil {
		return result{label: "undecodable output"}
	}
	switch x := v.(type) {
	case *events.LoyaltyResult:
		return result{label: string(x.Outcome)}
	case *events.LoyaltyError:
		return result{label: "error " + string(x.Category), retry: x.Retryable}
	}
	return result{label: "unknown output"}
}

// calls names the API calls an event type makes in a replay.
func calls(t events.EventType) string {
	switch t {
	case events.TypePurchaseCompleted:
		return "lookup-transaction (guard), then point-accrual unless found"
	case events.TypeRedemptionRequested:
		return "lookup-transaction (guard), then point-redemption unless found"
	case events.TypePurchaseRefunded:
		return "lookup-transaction (original, the refund's own id, the original's clawback slots), then point-redemption into the next slot unless its own is found, and a lookup of it"
	case events.TypeMemberOnboardRequested:
		return "user/onboard"
	case events.TypeMemberLinkRequested:
		return "user/link-member"
	case events.TypeMemberUnlinkRequested:
		return "user/unlink-member"
	}
	return "nothing (unknown event type)"
}

// dryRun decodes and validates rec and says what would be called.
func (r *Replayer) dryRun(ctx context.Context, rec *kgo.Record) result {
	pos := events.SourceID(rec.Topic, rec.Partition, rec.Offset)
	ev, err := r.o.Codec.DecodeEvent(ctx, rec.Topic, rec.Value)
	if err != nil {
		if ctx.Err() != nil {
			return result{gone: true}
		}
		var de *codec.DecodeError
		if !errors.As(err, &de) { // the registry, not the record
			return result{label: "not checked", retry: true, line: fmt.Sprintf("%s: not checked: %v", pos, err)}
		}
		return result{label: "would fail DECODE", line: fmt.Sprintf("%s: would fail DECODE: %v", pos, err)}
	}
	if err := ev.Validate(); err != nil {
		return result{label: "would fail VALIDATION", line: fmt.Sprintf("%s tx=%s: would fail VALIDATION: %v", pos, ev.ID(), err)}
	}
	return result{label: "would replay " + string(ev.Type()),
		line: fmt.Sprintf("%s tx=%s %s: would call %s", pos, ev.ID(), ev.Type(), calls(ev.Type()))}
}
