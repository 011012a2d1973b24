package pipeline

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchedAt is an offset fetch's answer for partition 0 of inTopic:
// committed at, with meta (nil: none).
func fetchedAt(at int64, meta *string) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Topics = []kmsg.OffsetFetchResponseTopic{{Topic: inTopic, Partitions: []kmsg.OffsetFetchResponseTopicPartition{
		{Partition: 0, Offset: at, Metadata: meta},
	}}}
	return resp
}

func ptr[T any](v T) *T { return &v }

// TestAtLeastOnceDispatchesBelowTheDurableHorizon: a record starts only
// below a horizon the committer made durable, records below the previous
// owner's horizon are Fresh, and, when that owner did not release the
// partition, they all wait TakeoverWait from the assignment.
func TestAtLeastOnceDispatchesBelowTheDurableHorizon(t *testing.T) {
	for _, released := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			const wait = 5 * time.Second
			p := modePipeline(t, Options{HorizonStep: 10, TakeoverWait: wait})
			a := p.mode.(*atLeastOnce)
			part := assign(p, 0)
			meta := horizonMetadata(6)
			if released {
				meta = releasedMetadata(6)
			}
			if err := a.onFetched(context.Background(), nil, fetchedAt(3, &meta)); err != nil {
				t.Fatal(err)
			}
			p.enqueue(polled(0, 3, 10, distinctKeys), true)
			if got := startAll(t, p); len(got) != 0 {
				t.Fatalf("started %v before any horizon was durable", offsets(got))
			}
			select {
			case <-a.wakeCommit:
			default:
				t.Fatal("the committer was not asked to move the horizon")
			}
			p.mu.Lock()
			if want := hz(part).want; want != 9+1+10 {
				t.Errorf("asked for horizon %d, want a step past the last record taken (20)", want)
			}
			a.advancedLocked(part, 7) // the commit carrying 7 succeeded
			p.mu.Unlock()

			got := startAll(t, p)
			if !released {
				if len(got) != 0 {
					t.Fatalf("started %v before the takeover wait of an unreleased partition", offsets(got))
				}
				time.Sleep(wait)
				got = startAll(t, p)
			}
			if want := []int64{3, 4, 5, 6}; !slices.Equal(offsets(got), want) {
				t.Fatalf("started %v, want %v: the records below the durable horizon", offsets(got), want)
			}
			for _, j := range got {
				if want := j.rec.Offset < 6; j.fresh != want {
					t.Errorf("offset %d: fresh %v, want %v (the previous owner's horizon is 6)", j.rec.Offset, j.fresh, want)
				}
			}
			p.mu.Lock()
			a.advancedLocked(part, 5) // a late answer never lowers it
			held := len(hz(part).held)
			p.mu.Unlock()
			if got := startAll(t, p); len(got) != 0 || held != 3 {
				t.Fatalf("after a lower horizon: started %v, %d held; want none started, 3 held", offsets(got), held)
			}
		})
	}
}

// TestAtLeastOnceGuessesWithoutAHorizon: a commit without a horizon (an
// older version, an offsets tool), or a partition adopted from a poll
// without its assignment, gets a buffer's worth of Fresh records; a
// partition never committed gets none.
func TestAtLeastOnceGuessesWithoutAHorizon(t *testing.T) {
	for _, c := range []struct {
		name  string
		fetch *kmsg.OffsetFetchResponse // nil: no assignment, no fetch
		fresh int
	}{
		{"foreign metadata", fetchedAt(0, ptr("from a tool")), 3},
		{"no metadata", fetchedAt(0, nil), 3},
		{"adopted", nil, 3},
		{"never committed", fetchedAt(-1, nil), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := modePipeline(t, Options{MaxInFlight: 2, MaxBuffered: 8, MaxBufferedPerPartition: 3})
			a := p.mode.(*atLeastOnce)
			if c.fetch != nil {
				assign(p, 0)
				if err := a.onFetched(context.Background(), nil, c.fetch); err != nil {
					t.Fatal(err)
				}
			}
			p.enqueue(polled(0, 0, 6, distinctKeys), true)
			p.mu.Lock()
			held := hz(p.parts[tp{inTopic, 0}]).held // no horizon yet: every record waits
			p.mu.Unlock()
			if len(held) != 6 {
				t.Fatalf("%d records held, want all 6", len(held))
			}
			fresh := 0
			for _, j := range held {
				if j.fresh {
					if j.rec.Offset >= int64(c.fresh) {
						t.Errorf("offset %d fresh, want only the first %d", j.rec.Offset, c.fresh)
					}
					fresh++
				}
			}
			if fresh != c.fresh {
				t.Errorf("%d records fresh, want %d", fresh, c.fresh)
			}
		})
	}
}

// TestAtLeastOnceRecordLife: from dispatch to done (a handler with no
// outputs), every counter keeps its invariant and returns to zero, and
// the commit point moves only over contiguous done records.
func TestAtLeastOnceRecordLife(t *testing.T) {
	p := modePipeline(t, Options{HorizonStep: 10})
	a := p.mode.(*atLeastOnce)
	part := assign(p, 0)
	if err := a.onFetched(context.Background(), nil, fetchedAt(-1, nil)); err != nil {
		t.Fatal(err)
	}
	p.enqueue(polled(0, 0, 3, distinctKeys), true)
	p.mu.Lock()
	a.advancedLocked(part, 3)
	p.mu.Unlock()
	started := startAll(t, p)
	if len(started) != 3 {
		t.Fatalf("started %v, want 0, 1, 2", offsets(started))
	}
	for _, step := range []struct {
		j      *job
		commit int64 // -1: not moved yet
	}{{started[1], -1}, {started[0], 2}, {started[2], 3}} {
		a.produce(step.j, nil)
		p.mu.Lock()
		checkCounters(t, p)
		next, _, ok := part.track.Commit()
		p.mu.Unlock()
		if !ok {
			next = -1
		}
		if next != step.commit {
			t.Fatalf("after offset %d: commit point %d, want %d", step.j.rec.Offset, next, step.commit)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.count != (counters{}) || part.count != (counters{}) || p.buffered != 0 {
		t.Fatalf("all done: counters %+v, partition %+v, %d buffered; want zero", p.count, part.count, p.buffered)
	}
}

// TestAtLeastOnceNeverHoldsDispatch: what the horizon admitted may start,
// and no record brings a failure along (the promise sends it to Fallback
// at once).
func TestAtLeastOnceNeverHoldsDispatch(t *testing.T) {
	p := modePipeline(t, Options{})
	part := assign(p, 0)
	part.revoking = true
	if !p.mode.mayStartLocked(part) {
		t.Error("a revoking partition's records may not start: its drain would stall")
	}
	if _, ok := p.mode.priorFailure(&job{p: part}); ok {
		t.Error("a record brought a failure")
	}
}
