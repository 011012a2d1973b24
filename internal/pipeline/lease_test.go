package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLeaseStopsAnExpelledMember: a member whose heartbeats go unanswered
// (a network that drops them, not one that refuses: franz-go notices an
// error at once and drops the partitions itself) keeps its partition as far as it knows, while the
// group expels it after its session timeout and gives the partition to
// another member. From then on, none of its handlers may start a partner
// write: Leased does not return nil to a record of the expelled member
// once its successor is processing the partition.
func TestLeaseStopsAnExpelledMember(t *testing.T) {
	e := newEnv(t, 1, kfake.BrokerConfigs(map[string]string{"group.min.session.timeout.ms": "1000"}))
	const n, early = 30, 10
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })

	var victim atomic.Value // the first member's ID, once known
	victim.Store("")
	e.c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		if id := victim.Load().(string); id != "" && req.(*kmsg.HeartbeatRequest).MemberID == id {
			return nil, nil, true // unanswered: the member cannot tell it is being expelled
		}
		return nil, nil, false
	})

	release := make(chan struct{})
	var allowed, zombie, refused atomic.Int32
	o := e.opts("g", echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		if r.Offset >= early { // held until the member is expelled
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := Leased(ctx); err != nil {
				refused.Add(1)
				return err
			}
			zombie.Add(1)
			return nil
		}
		if err := Leased(ctx); err != nil {
			return fmt.Errorf("offset %d: not leased while heartbeats are answered: %w", r.Offset, err)
		}
		allowed.Add(1)
		return nil
	}))
	o.CallTimeout, o.TakeoverWait, o.DrainTimeout = time.Second, time.Millisecond, time.Second
	o.ClientOpts = append(o.ClientOpts, kgo.SessionTimeout(2*time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
	first := start(t, o)
	eventually(t, 30*time.Second, func() (bool, string) {
		return allowed.Load() == early, fmt.Sprintf("first member: %d of %d records leased", allowed.Load(), early)
	})
	groups, err := e.adm.DescribeGroups(context.Background(), "g")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		for _, m := range g.Members {
			victim.Store(m.MemberID)
		}
	}

	var taken atomic.Int32
	second := o
	second.Handler = echo(func(context.Context, *kgo.Record, Meta) error { taken.Add(1); return nil })
	start(t, second)
	eventually(t, 30*time.Second, func() (bool, string) {
		return taken.Load() > 0, "the second member has not processed the partition yet"
	})
	close(release)
	eventually(t, 30*time.Second, func() (bool, string) {
		return refused.Load()+zombie.Load() > 0, "no held record of the first member has asked for the lease"
	})
	_ = first.stop(t)
	if z := zombie.Load(); z > 0 {
		t.Errorf("%d records of the expelled member were let write after its successor took the partition over", z)
	}
}

// TestLeaseRefusesACallTimeoutOverTheSession: a call timeout the group
// session cannot outlast would hold every write forever; Run refuses it.
func TestLeaseRefusesACallTimeoutOverTheSession(t *testing.T) {
	e := newEnv(t, 1)
	o := e.opts("g", echo(nil))
	o.CallTimeout = 10 * time.Second
	o.ClientOpts = append(o.ClientOpts, kgo.SessionTimeout(6*time.Second))
	err := start(t, o).wait(t)
	if err == nil || !strings.Contains(err.Error(), "not shorter than the group session timeout") {
		t.Fatalf("Run = %v; want the call timeout refused", err)
	}
}
