package pipeline

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// assignClock is an Observer noting when the first partition was assigned.
type assignClock struct {
	NopObserver
	once sync.Once
	at   atomic.Int64 // unix nanoseconds
}

func (c *assignClock) Assigned(_ string, _ []int32, assigned, _ bool) {
	if assigned {
		c.once.Do(func() { c.at.Store(time.Now().UnixNano()) })
	}
}

// clockSlack is how much earlier than a test's own clock reading a wait
// may have begun: the pipeline starts it before it tells the observer or
// the handler.
const clockSlack = 20 * time.Millisecond

// TestExactlyOnceCutRoundWaits: a rebalance aborts a round while a handler
// of each partition is in its partner call. The member keeps one of the
// two partitions and takes its record again only TakeoverWait after the
// cut, so that a guard lookup finds the cut call's effect if it had one.
// (The partition that moves waits at its new owner from the assignment:
// TestExactlyOnceTakeoverWait.)
func TestExactlyOnceCutRoundWaits(t *testing.T) {
	e := newEnv(t, 2)
	e.produce(10, strconv.Itoa, func(i int) int32 { return int32(i % 2) })
	const wait = 2 * time.Second
	var cutAt, again [2]atomic.Int64
	var calls [2]atomic.Int32
	first := e.eosOpts("g", "member-0", echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		if r.Offset != 0 {
			return nil
		}
		if calls[r.Partition].Add(1) == 1 {
			<-ctx.Done() // in its call until the round is cut
			cutAt[r.Partition].Store(time.Now().UnixNano())
			return ctx.Err()
		}
		again[r.Partition].CompareAndSwap(0, time.Now().UnixNano())
		return nil
	}))
	first.TakeoverWait = wait
	start(t, first)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return calls[0].Load() == 1 && calls[1].Load() == 1, "record 0 of each partition not in its call yet"
	})
	second := e.eosOpts("g", "member-1", echo(nil))
	second.TakeoverWait = wait
	start(t, second)
	kept := -1
	testkit.Eventually(t, 60*time.Second, func() (bool, string) {
		for p := range again {
			if again[p].Load() != 0 {
				kept = p
				return true, ""
			}
		}
		return false, "the first member has not taken its kept partition's record 0 again"
	})
	// cutAt is read after the handler saw the cut, a little after the wait
	// began: the same slack.
	if gap := time.Duration(again[kept].Load() - cutAt[kept].Load()); gap < wait-clockSlack {
		t.Errorf("partition %d: record 0 taken again %v after its call was cut, want at least the takeover wait %v", kept, gap, wait)
	}
}
