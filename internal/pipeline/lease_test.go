package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
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

	clientOpts := []kgo.Opt{kgo.SessionTimeout(2 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond)}
	if z := expelledWrites(t, e, &victim, early, clientOpts, nil); z > 0 {
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

// TestLeaseStopsAMemberCutOffMidRebalance: a member whose heartbeats are
// answered REBALANCE_IN_PROGRESS (another member joined) and which is then
// cut off, its JoinGroup lost, is removed when the rebalance's join phase
// times out, at RebalanceTimeout, long before its session would expire. A
// heartbeat answered REBALANCE_IN_PROGRESS proves membership only until
// then: none of its handlers may start a partner write once its successor
// is processing the partition.
func TestLeaseStopsAMemberCutOffMidRebalance(t *testing.T) {
	e := newEnv(t, 1, kfake.BrokerConfigs(map[string]string{"group.min.session.timeout.ms": "1000"}))
	const n, early = 30, 10
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })

	var victim atomic.Value // the first member's ID, once known
	victim.Store("")
	var joined atomic.Bool    // the second member has asked to join: a rebalance began
	var answered atomic.Int32 // the victim's heartbeats let through since
	e.c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		id := victim.Load().(string)
		if id == "" {
			return nil, nil, false
		}
		if req.(*kmsg.JoinGroupRequest).MemberID == id {
			return nil, nil, true // the victim's rejoin is lost
		}
		joined.Store(true)
		return nil, nil, false
	})
	e.c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		id := victim.Load().(string)
		if id == "" || req.(*kmsg.HeartbeatRequest).MemberID != id || !joined.Load() {
			return nil, nil, false
		}
		if answered.Add(1) <= 3 {
			return nil, nil, false // answered REBALANCE_IN_PROGRESS
		}
		return nil, nil, true // then cut off
	})

	// The session (8s) outlasts the rebalance timeout (2s) by far: only
	// the rebalance can remove the victim before its successor starts.
	clientOpts := []kgo.Opt{kgo.SessionTimeout(8 * time.Second), kgo.RebalanceTimeout(2 * time.Second),
		kgo.HeartbeatInterval(200 * time.Millisecond)}
	z := expelledWrites(t, e, &victim, early, clientOpts, func() {
		if answered.Load() == 0 {
			t.Fatal("no heartbeat of the victim was answered during the rebalance")
		}
	})
	if z > 0 {
		t.Errorf("%d records of the member cut off mid-rebalance were let write after its successor took the partition over", z)
	}
}

// expelledWrites is what the lease tests share. A first member leases
// records 0 to early-1 while its heartbeats are answered; its later
// records wait. Once it has leased them, its member ID goes into victim,
// so that the caller's broker faults cut it off, and a second member
// takes the partition over. Then (after taken, if given) the waiting
// records ask for the lease: it returns how many were let write.
func expelledWrites(t *testing.T, e *env, victim *atomic.Value, early int32, clientOpts []kgo.Opt, taken func()) int32 {
	t.Helper()
	release := make(chan struct{})
	var allowed, zombie, refused atomic.Int32
	o := e.opts("g", echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		if r.Offset >= int64(early) { // held until the member is expelled
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
	o.ClientOpts = append(o.ClientOpts, clientOpts...)
	first := start(t, o)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
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

	var handled atomic.Int32
	second := o
	second.Handler = echo(func(context.Context, *kgo.Record, Meta) error { handled.Add(1); return nil })
	start(t, second)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return handled.Load() > 0, "the second member has not processed the partition yet"
	})
	if taken != nil {
		taken()
	}
	close(release)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return refused.Load()+zombie.Load() > 0, "no held record of the first member has asked for the lease"
	})
	_ = first.stop(t)
	return zombie.Load()
}

// TestLeaseFromTheSyncGroup: a member whose heartbeats are all answered
// REBALANCE_IN_PROGRESS from its first on (replicas started one after
// another: each JoinGroup starts a rebalance before the member's first
// heartbeat) still writes, under the lease of the SyncGroup answer that
// brought its assignment. Before, it had no lease at all: its records
// waited for one, its revoke drain for them, and the rebalance for the
// drain.
func TestLeaseFromTheSyncGroup(t *testing.T) {
	e := newEnv(t, 1)
	const n = 20
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })
	var rebalancing atomic.Int32
	e.c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		rebalancing.Add(1)
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp, nil, true
	})
	var leased atomic.Int32
	o := e.opts("g", echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		if err := Leased(ctx); err != nil {
			return err
		}
		leased.Add(1)
		return nil
	}))
	o.CallTimeout = time.Second
	o.ClientOpts = append(o.ClientOpts, kgo.HeartbeatInterval(100*time.Millisecond))
	m := start(t, o)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return leased.Load() == n, fmt.Sprintf("%d of %d records leased (%d heartbeats answered REBALANCE_IN_PROGRESS)", leased.Load(), n, rebalancing.Load())
	})
	if rebalancing.Load() == 0 {
		t.Error("no heartbeat was answered REBALANCE_IN_PROGRESS: the test proves nothing")
	}
	_ = m.stop(t)
}

// TestLeaseHeldOutsideAHandler: outside a Handler there is no lease to
// hold; LeaseHeld (LeaseGate.Allowed) then only says whether ctx is live,
// as Leased only checks ctx.
func TestLeaseHeldOutsideAHandler(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if !LeaseHeld(ctx) || (LeaseGate{}).Wait(ctx) != nil {
		t.Error("a live context outside a handler: not held")
	}
	cancel()
	if LeaseHeld(ctx) || (LeaseGate{}).Allowed(ctx) {
		t.Error("an ended context: held")
	}
}
