package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
)

// statusPartner answers every lookup with its status of the moment, and
// counts lookups and writes. Safe for concurrent use.
type statusPartner struct {
	partner // nil: a call not set up panics the test
	mu      sync.Mutex
	status  string
	fail    error // answered instead, when set
	lookups int
	writes  int
}

func (s *statusPartner) set(status string) {
	s.mu.Lock()
	s.status = status
	s.mu.Unlock()
}

func (s *statusPartner) failWith(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

func (s *statusPartner) counts() (lookups, writes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookups, s.writes
}

func (s *statusPartner) LookupTransaction(context.Context, loyalty.LookupRequest) (*loyalty.Transaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups++
	if s.fail != nil {
		return nil, s.fail
	}
	return &loyalty.Transaction{TransactionType: redemptionType, Status: s.status, TransactionPoint: 5}, nil
}

func (s *statusPartner) Redeem(_ context.Context, r loyalty.RedemptionRequest) (*loyalty.RedemptionResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return &loyalty.RedemptionResult{UsedPoint: r.UsedPoint, BitReference: "B"}, nil
}

// held runs a guarded redemption (a Fresh record, say) through the attempt
// policy of b in a goroutine of the bubble; its answer arrives on the
// channel.
func held(t *testing.T, b *Bridge, p partner) (<-chan error, *recordState) {
	t.Helper()
	h, err := handlerFor(&events.RedemptionRequested{TransactionID: "H-1", LoyaltyID: "L-1", UsedPoint: 5, Sign: ptr("s")}, &prof)
	if err != nil {
		t.Fatal(err)
	}
	st := &recordState{id: "H-1", guard: true}
	ch := make(chan error, 1)
	go func() {
		_, err := b.policy(st, h)(t.Context(), p)
		ch <- err
	}()
	return ch, st
}

// Held means held: a lookup answer the profile does not name (a status
// here) holds the record with nothing written, for UnrecognisedHold, with
// back-off, without spending its one attempt of budget, shown by the
// gauge and readiness, and warned about once a minute at most; only then
// is it a retryable TRANSIENT_EXHAUSTED error with reason
// UNRECOGNISED_ANSWER.
func TestUnrecognisedHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.DebugLevel)
		m := telemetry.NewMetrics()
		b := &Bridge{o: Options{RecordAttempts: 1, RetryBackoff: time.Second, UnrecognisedHold: 10 * time.Minute, Profile: prof, Metrics: m},
			log: zap.New(core), now: time.Now}
		p := &statusPartner{status: "PENDING"}
		start := time.Now()
		ch, st := held(t, b, p)
		synctest.Wait()
		if b.HeldUnrecognised() != 1 || !errors.Is(b.Health(), ErrHeldUnrecognised) || gauge(m.HeldUnrecognised) != 1 {
			t.Fatalf("not shown held: %d, %v, gauge %v", b.HeldUnrecognised(), b.Health(), gauge(m.HeldUnrecognised))
		}
		time.Sleep(9*time.Minute + 59*time.Second)
		synctest.Wait()
		select {
		case err := <-ch:
			t.Fatalf("answered after %s of a 10m hold: %v", time.Since(start), err)
		default:
		}
		lookups, writes := p.counts()
		// Back-off doubling from 1s, capped at a minute: 1+2+…+32 s, then
		// about one a minute (each 30–60 s).
		if lookups < 8 || lookups > 25 || writes != 0 {
			t.Fatalf("%d lookups, %d writes while held", lookups, writes)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		var err error
		select {
		case err = <-ch:
		default:
			t.Fatalf("still held after %s of a 10m hold", time.Since(start))
		}
		var rf *recordFailure
		if !errors.As(err, &rf) || rf.cat != events.CategoryTransientExhausted || rf.reason != events.ReasonUnrecognisedAnswer ||
			!retryable(rf.cat, err) || !loyalty.IsUnrecognised(err) {
			t.Fatalf("err %v, want a retryable TRANSIENT_EXHAUSTED %s", err, events.ReasonUnrecognisedAnswer)
		}
		if _, writes := p.counts(); writes != 0 || st.attempts-st.free != 0 {
			t.Fatalf("%d writes, %d attempts of budget spent", writes, st.attempts-st.free)
		}
		if b.HeldUnrecognised() != 0 || b.Health() != nil || gauge(m.HeldUnrecognised) != 0 {
			t.Fatalf("still shown held: %d, %v, gauge %v", b.HeldUnrecognised(), b.Health(), gauge(m.HeldUnrecognised))
		}
		if got := gauge(m.UnrecognisedAnswers.WithLabelValues(loyalty.FieldStatus)); int(got) != p.lookups {
			t.Errorf("unrecognised_answers_total{field=status} %v, want one per lookup (%d)", got, p.lookups)
		}
		warns := logs.FilterLevelExact(zapcore.WarnLevel).FilterField(zap.String("answered", "PENDING")).Len()
		if warns < 1 || warns > 11 {
			t.Errorf("%d warnings over 10 minutes, want one a minute at most", warns)
		}
	})
}

// A held record whose answer becomes one the profile names (a pending
// status settles) is answered by it, and leaves the hold: here found
// applied, with nothing written.
func TestUnrecognisedHoldSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := telemetry.NewMetrics()
		b := &Bridge{o: Options{RecordAttempts: 1, RetryBackoff: time.Second, UnrecognisedHold: 10 * time.Minute, Profile: prof, Metrics: m},
			log: zap.NewNop(), now: time.Now}
		p := &statusPartner{status: "PENDING"}
		ch, _ := held(t, b, p)
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if b.HeldUnrecognised() != 1 {
			t.Fatal("not held")
		}
		p.set(appliedStatus)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("err %v, want ALREADY_APPLIED", err)
			}
		default:
			t.Fatal("still held after the answer settled")
		}
		if _, writes := p.counts(); writes != 0 || b.HeldUnrecognised() != 0 || gauge(m.HeldUnrecognised) != 0 {
			t.Fatalf("%d writes, %d held", writes, b.HeldUnrecognised())
		}
	})
}

// gauge reads a gauge's or counter's value.
func gauge(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Gauge != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}

// Attempts made while held are not the record's budget: a record held a
// while, whose lookups then fail transiently, still gets its
// RecordAttempts at those failures, and leaves the hold meanwhile.
func TestHeldAttemptsSpendNoBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := telemetry.NewMetrics()
		b := &Bridge{o: Options{RecordAttempts: 3, RetryBackoff: time.Second, UnrecognisedHold: 10 * time.Minute, Profile: prof, Metrics: m},
			log: zap.NewNop(), now: time.Now}
		p := &statusPartner{status: "PENDING"}
		ch, st := held(t, b, p)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		heldLookups, _ := p.counts()
		if heldLookups < 3 || b.HeldUnrecognised() != 1 {
			t.Fatalf("%d lookups, %d held", heldLookups, b.HeldUnrecognised())
		}
		p.failWith(&loyalty.TransientError{Op: "lookup-transaction", Status: 503})
		var err error
		select {
		case err = <-ch:
		case <-time.After(5 * time.Minute):
			t.Fatal("no answer 5 minutes after the failures began")
		}
		lookups, writes := p.counts()
		if !transient(err) || loyalty.IsUnrecognised(err) || lookups-heldLookups != 3 || writes != 0 {
			t.Fatalf("err %v after %d failed lookups (want 3, the budget) and %d writes", err, lookups-heldLookups, writes)
		}
		if st.attempts != lookups || b.HeldUnrecognised() != 0 || gauge(m.HeldUnrecognised) != 0 {
			t.Fatalf("attempts %d of %d lookups; %d held", st.attempts, lookups, b.HeldUnrecognised())
		}
	})
}

// A back-off that overflows (a --record-backoff of 2^48 ns doubled
// sixteen times is 0) waits the cap, not nothing: the held record does not
// spin on lookups.
func TestHeldBackoffOverflowWaitsTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &Bridge{o: Options{RecordAttempts: 1, RetryBackoff: 1 << 48, UnrecognisedHold: 30 * time.Minute, Profile: prof},
			log: zap.NewNop(), now: time.Now}
		h, err := handlerFor(&events.RedemptionRequested{TransactionID: "H-1", LoyaltyID: "L-1", UsedPoint: 5, Sign: ptr("s")}, &prof)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		p := &cappedStatusPartner{statusPartner: &statusPartner{status: "PENDING"}, most: 500, cancel: cancel}
		_, err = b.policy(&recordState{id: "H-1", guard: true}, h)(ctx, p)
		if !loyalty.IsUnrecognised(err) {
			t.Fatalf("after the hold: %v, want the unrecognised answer", err)
		}
		// Every wait is the cap's, a minute, half of it jittered: 30 to 60
		// lookups over the half hour.
		if lookups, _ := p.counts(); lookups > 61 {
			t.Fatalf("%d lookups in a 30m hold with a back-off capped at a minute", lookups)
		}
	})
}

// cappedStatusPartner cancels its context after most lookups: a record
// that would spin on them ends.
type cappedStatusPartner struct {
	*statusPartner
	most   int
	cancel context.CancelFunc
}

func (c *cappedStatusPartner) LookupTransaction(ctx context.Context, r loyalty.LookupRequest) (*loyalty.Transaction, error) {
	if n, _ := c.counts(); n >= c.most {
		c.cancel()
	}
	return c.statusPartner.LookupTransaction(ctx, r)
}

// The warning limit: a key warns again once a minute has passed (exactly
// a minute included); at most maxWarnKeys keys are remembered, those a
// minute old or more making room, and a new key finding no room is not
// warned about (its records are still held; the limit is on the logs).
func TestWarnLimit(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	key := func(i int) string { return fmt.Sprintf("status\x00V%d", i) }
	fill := func() *warnLimit {
		w := &warnLimit{}
		for i := range maxWarnKeys {
			if !w.allow(key(i), t0) {
				t.Fatalf("key %d of %d refused", i+1, maxWarnKeys)
			}
		}
		return w
	}
	for _, tc := range []struct {
		name string
		w    *warnLimit
		key  string
		at   time.Duration // after t0
		want bool
	}{
		{"the same key within the minute", fill(), key(0), warnEvery - time.Nanosecond, false},
		{"the same key a minute later", fill(), key(0), warnEvery, true},
		{"a new key, every place taken within the minute", fill(), key(maxWarnKeys), warnEvery - time.Nanosecond, false},
		{"a new key once the others are a minute old", fill(), key(maxWarnKeys), warnEvery, true},
		{"a new key with a place left", &warnLimit{}, key(0), 0, true},
	} {
		if got := tc.w.allow(tc.key, t0.Add(tc.at)); got != tc.want {
			t.Errorf("%s: allow %v, want %v", tc.name, got, tc.want)
		}
	}
	// One place short of full, a new key takes the last place.
	w := &warnLimit{}
	for i := range maxWarnKeys - 1 {
		w.allow(key(i), t0)
	}
	if !w.allow(key(maxWarnKeys), t0) || len(w.last) != maxWarnKeys {
		t.Errorf("the last place: %d keys kept, want %d", len(w.last), maxWarnKeys)
	}
}

// A held record's wait is the back-off step's ceiling, RetryBackoff
// doubled per step and capped at maxHeldBackoff, jittered within its
// upper half: never more than the ceiling (a record waits no longer than
// its step says) and never less than half of it (held records do not
// crowd the partner with lookups). The smallest back-off (1 ns, which
// --record-backoff accepts) has a ceiling of 1 ns and waits 0 or 1 ns.
func TestHeldBackoffJitter(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	cause := errors.New("an answer not in the profile")
	for _, base := range []time.Duration{time.Second, time.Nanosecond} {
		b := &Bridge{o: Options{RetryBackoff: base, UnrecognisedHold: time.Hour}, log: zap.NewNop(),
			now: func() time.Time { return now }}
		for range 200 {
			st := &recordState{id: "H-1"}
			for step := range 9 {
				d, err := b.holdUnrecognised(st, cause)
				ceil := min(base<<step, maxHeldBackoff)
				if err != nil || d < ceil/2 || d > ceil {
					t.Fatalf("back-off %v, step %d: wait %v (%v), want %v to %v", base, step, d, err, ceil/2, ceil)
				}
			}
			b.release(st)
		}
	}
}

// The warning says what to check: a transactionId found as the other kind
// names --partner-transaction-key; any other answer not in the profile
// names the --partner-* settings.
func TestUnrecognisedWarningNamesTheSetting(t *testing.T) {
	for _, tc := range []struct {
		field, want string
	}{
		{loyalty.FieldSharedID, "--partner-transaction-key id"},
		{loyalty.FieldStatus, "partner answer not in the partner profile"},
	} {
		core, logs := observer.New(zapcore.WarnLevel)
		b := &Bridge{o: Options{UnrecognisedHold: time.Hour}, log: zap.New(core)}
		b.unrecognised(&recordState{id: "H-1"}, &loyalty.UnrecognisedAnswerError{Op: "lookup-transaction", Field: tc.field, Value: "X"}, time.Now())
		if all := logs.All(); len(all) != 1 || !strings.Contains(all[0].Message, tc.want) {
			t.Errorf("%s: warnings %v, want one saying %q", tc.field, all, tc.want)
		}
	}
}
