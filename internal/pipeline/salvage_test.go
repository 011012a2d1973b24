package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// salvageLog keeps what Options.Salvage was given, and the order of
// salvages and releases.
type salvageLog struct {
	NopObserver
	mu       sync.Mutex
	salvaged map[string]int // output value (coord of its input) → times salvaged
	// runs: output value and its "run" header (runTagged) → times salvaged
	runs     map[string]int
	events   []string       // "salvage p<partition>", "released p<partition>"
	revoked  map[int32]bool // the partitions of the first revocation
	revoking chan struct{}  // closed when a revocation starts
	released chan struct{}  // closed when partitions are first released
	once     sync.Once
	relOnce  sync.Once
}

func newSalvageLog() *salvageLog {
	return &salvageLog{salvaged: map[string]int{}, runs: map[string]int{}, revoked: map[int32]bool{},
		revoking: make(chan struct{}), released: make(chan struct{})}
}

func (s *salvageLog) salvage(_ context.Context, outs []*kgo.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := map[int32]bool{}
	for _, o := range outs {
		s.salvaged[string(o.Value)]++
		for _, h := range o.Headers {
			if h.Key == "run" {
				s.runs[string(o.Value)+" run "+string(h.Value)]++
			}
		}
		var p int32
		var off int64
		if _, err := fmt.Sscanf(string(o.Value), inTopic+"/%d/%d", &p, &off); err == nil && !parts[p] {
			parts[p] = true
			s.events = append(s.events, fmt.Sprintf("salvage p%d", p))
		}
	}
	return nil
}

// runTagged gives every output of h a "run" header naming the handler
// call that made it: a record run in two aborted rounds is salvaged
// twice, each run's outputs once.
func runTagged(h Handler) Handler {
	var calls atomic.Int64
	return func(ctx context.Context, rec *kgo.Record, meta Meta) ([]*kgo.Record, error) {
		outs, err := h(ctx, rec, meta)
		run := []byte(fmt.Sprint(calls.Add(1)))
		for _, o := range outs {
			o.Headers = append(o.Headers, kgo.RecordHeader{Key: "run", Value: run})
		}
		return outs, err
	}
}

func (s *salvageLog) Assigned(_ string, partitions []int32, assigned, _ bool) {
	if !assigned {
		s.once.Do(func() {
			s.mu.Lock()
			for _, p := range partitions {
				s.revoked[p] = true
			}
			s.mu.Unlock()
			close(s.revoking)
		})
	}
}

func (s *salvageLog) Released(_ string, partitions []int32) {
	s.mu.Lock()
	for _, p := range partitions {
		s.events = append(s.events, fmt.Sprintf("released p%d", p))
	}
	s.mu.Unlock()
	s.relOnce.Do(func() { close(s.released) })
}

func (s *salvageLog) isRevoked(p int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revoked[p]
}

func (s *salvageLog) count(value string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.salvaged[value]
}

// TestExactlyOnceSalvagesAnAbortedRoundOnShutdown: a round aborted at
// shutdown (one record outlives the drain) hands Salvage the outputs of
// every record of it whose handler returned, once each, and none of the
// record that was cut.
func TestExactlyOnceSalvagesAnAbortedRoundOnShutdown(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(20, func(i int) string { return fmt.Sprintf("k%d", i) }, func(int) int32 { return 0 })
	const stuck = 7
	var (
		mu       sync.Mutex
		returned []string // coords of records whose handler returned nil
	)
	reached := make(chan struct{})
	h := echo(func(ctx context.Context, rec *kgo.Record, _ Meta) error {
		if rec.Offset == stuck {
			close(reached)
			<-ctx.Done() // cut at the drain's end
			return ctx.Err()
		}
		mu.Lock()
		returned = append(returned, coord(rec))
		mu.Unlock()
		return nil
	})
	log := newSalvageLog()
	o := e.eosOpts("g", "salvage-shutdown", h)
	o.DrainTimeout = 200 * time.Millisecond
	o.Salvage = log.salvage
	r := start(t, o)
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the stuck record was never handled")
	}
	// Every other record of the round returns; then stop.
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(returned) == 19, fmt.Sprintf("%d of 19 records returned", len(returned))
	})
	r.stop(t)
	mu.Lock()
	defer mu.Unlock()
	for _, c := range returned {
		if n := log.count(c); n != 1 {
			t.Errorf("%s salvaged %d times, want once", c, n)
		}
	}
	if n := log.count(fmt.Sprintf("%s/0/%d", inTopic, stuck)); n != 0 {
		t.Errorf("the record cut off was salvaged %d times: it has no outputs", n)
	}
}

// TestExactlyOnceSalvagesBeforeRelease: a revocation dooms the round; the
// outputs of the revoked partition's records whose handlers returned (one
// only after the revocation began) are salvaged before the partition is
// released to its next owner, and not again by the round's abort. The partition the member keeps has a record
// that returns only after that release, so the round's own abort, which
// waits for every handler, cannot have salvaged them first.
func TestExactlyOnceSalvagesBeforeRelease(t *testing.T) {
	e := newEnv(t, 2)
	const n = 200
	e.produce(n, func(i int) string { return fmt.Sprintf("k%d", i) }, func(i int) int32 { return int32(i % 2) })
	log := newSalvageLog()
	lateRecord, latePart := "", int32(-1) // guarded by log.mu
	blocked := make(chan int32, 2)
	h := echo(func(ctx context.Context, rec *kgo.Record, _ Meta) error {
		if rec.Offset != 3 {
			return nil
		}
		select {
		case blocked <- rec.Partition:
		default: // handled again after the revocation
		}
		select {
		case <-log.revoking:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !log.isRevoked(rec.Partition) {
			select { // the kept partition's record outlives the release
			case <-log.released:
			case <-ctx.Done():
				return ctx.Err()
			}
			return nil
		}
		log.mu.Lock()
		if lateRecord == "" {
			lateRecord, latePart = coord(rec), rec.Partition
		}
		log.mu.Unlock()
		return nil
	})
	oa := e.eosOpts("g", "salvage-a", runTagged(h))
	oa.TakeoverWait = noWait
	oa.Salvage = log.salvage
	oa.Observer = log
	// A first round (2 × MaxInFlight) of both partitions' records.
	oa.MaxInFlight, oa.MaxBuffered, oa.RoundRecords = n, 2*n, 2*n
	start(t, oa)
	for range 2 { // both partitions' records wait in member a's round
		select {
		case <-blocked:
		case <-time.After(30 * time.Second):
			t.Fatal("member a never reached the records that wait")
		}
	}
	ob := e.eosOpts("g", "salvage-b", echo(nil))
	ob.TakeoverWait = noWait
	start(t, ob)
	e.waitCommittedToEnd("g")
	e.checkOutputs(e.readAll(outTopic, true), true)
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.revoked) != 1 {
		t.Fatalf("member a gave up partitions %v; the test wants one revoked and one kept", log.revoked)
	}
	if lateRecord == "" || log.salvaged[lateRecord] == 0 {
		t.Fatalf("the revoked record that returned after the revocation began (%q) was never salvaged; events %v", lateRecord, log.events)
	}
	// The round's abort, after the revocation, salvages the kept
	// partition's records only: each run's outputs are written once.
	for v, n := range log.runs {
		if n != 1 {
			t.Errorf("%s salvaged %d times, want once", v, n)
		}
	}
	if len(log.runs) == 0 {
		t.Error("no salvaged output names its run")
	}
	// Its partition's next owner may run it as soon as the partition is
	// released: the salvage must come first.
	salvaged := slices.Index(log.events, fmt.Sprintf("salvage p%d", latePart))
	released := slices.Index(log.events, fmt.Sprintf("released p%d", latePart))
	if released < 0 || salvaged > released {
		t.Errorf("partition %d: salvaged at event %d, released at %d: %v", latePart, salvaged, released, log.events)
	}
}

// timedSalvage is an Options.Salvage that notes, for each call, the
// outputs it was given and how long its context had left; blocking, it
// waits for that context's end and returns its error, as a salvage to a
// Kafka that never answers does.
type timedSalvage struct {
	block bool
	mu    sync.Mutex
	calls []salvageCall
}

type salvageCall struct {
	values   []string
	left     time.Duration // until the context's deadline, at the call
	deadline bool          // the context had one
}

func (s *timedSalvage) salvage(ctx context.Context, outs []*kgo.Record) error {
	dl, ok := ctx.Deadline()
	c := salvageCall{left: time.Until(dl), deadline: ok}
	for _, o := range outs {
		c.values = append(c.values, string(o.Value))
	}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	if s.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (s *timedSalvage) called() []salvageCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// checkHalfDrain fails unless every salvage had a deadline at most half
// of drain away: what is left of the stop or the rebalance needs the rest.
func checkHalfDrain(t *testing.T, calls []salvageCall, drain time.Duration) {
	t.Helper()
	for i, c := range calls {
		if !c.deadline || c.left > drain/2 {
			t.Errorf("salvage %d: deadline %v (set %v), want at most half of DrainTimeout %v away", i, c.left, c.deadline, drain)
		}
	}
}

// TestExactlyOnceShutdownSalvageIsBoundedAndLogged: a round aborted at
// shutdown gives Salvage half of DrainTimeout, not more (the release
// commit and leaving the group come after it), and a salvage that fails
// (here Kafka never answers it) is logged with how many records' outputs
// it could not write.
func TestExactlyOnceShutdownSalvageIsBoundedAndLogged(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(20, func(i int) string { return fmt.Sprintf("k%d", i) }, func(int) int32 { return 0 })
	const stuck = 7
	var returned atomic.Int32
	reached := make(chan struct{})
	h := echo(func(ctx context.Context, rec *kgo.Record, _ Meta) error {
		if rec.Offset == stuck {
			close(reached)
			<-ctx.Done() // cut at the drain's end
			return ctx.Err()
		}
		returned.Add(1)
		return nil
	})
	s := &timedSalvage{block: true}
	core, logs := observer.New(zap.WarnLevel)
	o := e.eosOpts("g", "salvage-bounded", h)
	o.DrainTimeout = time.Second
	o.Salvage = s.salvage
	o.Logger = zap.New(core)
	r := start(t, o)
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the stuck record was never handled")
	}
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return returned.Load() == 19, fmt.Sprintf("%d of 19 records returned", returned.Load())
	})
	r.stop(t)
	calls := s.called()
	if len(calls) != 1 || len(calls[0].values) != 19 {
		t.Fatalf("salvages %+v, want one of the 19 records' outputs", calls)
	}
	checkHalfDrain(t, calls, o.DrainTimeout)
	warned := logs.FilterMessageSnippet("not salvaged").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings of a failed salvage, want 1; logged %v", len(warned), logs.All())
	}
	fields := warned[0].ContextMap()
	if fields["records"] != int64(19) || !strings.Contains(fmt.Sprint(fields["error"]), context.DeadlineExceeded.Error()) {
		t.Errorf("the failed salvage's warning: %v, want records 19 and its context's deadline", fields)
	}
}

// TestExactlyOnceSalvagesARoundItsCommitLost: a round whose records all
// returned but whose transaction does not commit gives Salvage their
// outputs, within half of DrainTimeout: when the group rebalanced (its
// offsets refused with REBALANCE_IN_PROGRESS: the transaction aborts and
// the records run again), and when ending the transaction fails (Run
// stops).
func TestExactlyOnceSalvagesARoundItsCommitLost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		code  int16
		stops bool
	}{
		{"aborted", kerr.RebalanceInProgress.Code, false},
		{"failed", kerr.GroupAuthorizationFailed.Code, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			const n = 5
			e.produce(n, func(i int) string { return fmt.Sprintf("k%d", i) }, func(int) int32 { return 0 })
			var refused atomic.Bool
			var arm sync.Once
			// The first handler call comes after the partition's claim
			// committed: the next offset commit is the round's.
			h := echo(func(context.Context, *kgo.Record, Meta) error {
				arm.Do(func() {
					e.c.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
						refused.Store(true)
						return testkit.RefuseTxnOffsetCommit(req, tc.code), nil, true
					})
				})
				return nil
			})
			s := &timedSalvage{}
			o := e.eosOpts("g", "salvage-commit-"+tc.name, h)
			o.DrainTimeout = 2 * time.Second
			o.TakeoverWait = noWait
			o.Salvage = s.salvage
			r := start(t, o)
			if tc.stops {
				err := r.wait(t)
				if err == nil || !strings.Contains(err.Error(), "transaction") {
					t.Errorf("Run after its transaction failed to end: %v, want that error", err)
				}
				// Kafka's definite refusal: franz-go aborted, nothing
				// is unconfirmed.
				if errors.Is(err, ErrTransactionUnconfirmed) {
					t.Errorf("Run after a refused offset commit: %v, marked unconfirmed", err)
				}
			} else {
				e.waitCommittedToEnd("g")
				e.checkOutputs(e.readAll(outTopic, true), true)
			}
			if !refused.Load() {
				t.Fatal("the round's offset commit was never refused")
			}
			// The first salvage is the refused round's; a revocation
			// may follow (the client rejoins), with its own deadline.
			calls := s.called()
			if len(calls) == 0 || len(calls[0].values) == 0 {
				t.Fatalf("salvages %+v, want the round's outputs", calls)
			}
			seen := map[string]bool{}
			for _, v := range calls[0].values {
				if seen[v] {
					t.Errorf("%s salvaged twice", v)
				}
				seen[v] = true
			}
			checkHalfDrain(t, calls[:1], o.DrainTimeout)
		})
	}
}
