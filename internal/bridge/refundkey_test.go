package bridge_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// keyed is rec with another key (nil: a null key).
func keyed(rec *kgo.Record, key []byte) *kgo.Record {
	rec.Key = key
	return rec
}

// The clawback cap needs the refunds of one original in one process: a
// refund keyed by its loyaltyId or its originalTransactionId is handled; one
// keyed otherwise is refused, before any call, with an error event that
// names the rule and the keys accepted, never the key itself; retryable,
// since a replay (one process) handles it.
func TestRefundKeyIsChecked(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply}})
	b := s.bridge(nil)
	pt, rt := topics.Purchase, topics.RefundRedemption
	if r := s.handle(b, s.record(pt, purchase("rk-p", 6, 100_000)), false); r.outcome() != "APPLIED" {
		t.Fatalf("purchase: %s (%s)", r.outcome(), r.detail())
	}
	member := sim.MemberID(6)
	for _, c := range []struct {
		name, id string
		key      []byte
	}{{"loyaltyId", "rk-1", []byte(member)}, {"originalTransactionId", "rk-2", []byte("rk-p")}} {
		r := s.handle(b, keyed(s.record(rt, refundOf(c.id, "rk-p", 6, 10_000, refundBase)), c.key), false)
		if r.outcome() != "APPLIED" || r.points() != 10 {
			t.Errorf("keyed by %s: %s, %d points (%s)", c.name, r.outcome(), r.points(), r.detail())
		}
	}

	redemptions := s.sim.Calls(sim.EndpointRedemption, http.StatusOK)
	email := "someone@example.com"
	for _, c := range []struct {
		name, id string
		key      []byte
		says     string
	}{
		{"own transactionId", "rk-3", []byte("rk-3"), "record key is the refund's own transactionId"},
		{"null", "rk-4", nil, "record key is null"},
		{"empty", "rk-5", []byte{}, "record key is empty"},
		{"other", "rk-6", []byte(email), "record key is another value of 19 bytes"},
	} {
		r := s.handle(b, keyed(s.record(rt, refundOf(c.id, "rk-p", 6, 20_000, refundBase)), c.key), false)
		if r.outcome() != "error VALIDATION "+events.ReasonRefundKey || !r.err.Retryable || string(r.rec.Key) != c.id {
			t.Errorf("keyed by %s: %s, retryable %v, key %q (%s)", c.name, r.outcome(), r.err != nil && r.err.Retryable, r.rec.Key, r.detail())
			continue
		}
		d := r.detail()
		for _, want := range []string{c.says, "not the refund's loyaltyId or its originalTransactionId rk-p",
			"one process handles the refunds of one original", "keyed by loyaltyId"} {
			if !strings.Contains(d, want) {
				t.Errorf("keyed by %s: detail %q lacks %q", c.name, d, want)
			}
		}
		if strings.Contains(d, email) || strings.Contains(d, member) {
			t.Errorf("keyed by %s: detail shows the key or the loyaltyId: %q", c.name, d)
		}
	}
	if n := s.sim.Calls(sim.EndpointRedemption, http.StatusOK) - redemptions; n != 0 {
		t.Errorf("%d redemptions for refused refunds", n)
	}
	if got := s.clawed(6, 100); got != 20 {
		t.Errorf("clawed back %d, want 20", got)
	}
	if n := value(t, s.metrics.RefundKeyMismatches.WithLabelValues(rt, "refused")); n != 4 {
		t.Errorf("refused counted %v, want 4", n)
	}
	if logs := s.logs.String(); strings.Count(logs, `"level":"warn","ts"`) < 1 || !strings.Contains(logs, "refund keyed otherwise") ||
		strings.Contains(logs, email) {
		t.Errorf("logs: want one warning naming no key:\n%s", logs)
	}

	// The refused refund, replayed (one process, whatever the key), is
	// clawed back. (Its amount is not its predecessors': a replay takes an
	// equal twin's clawback for its own.)
	replay := s.bridge(func(o *bridge.Options) { o.Replay = true })
	if r := s.handle(replay, keyed(s.record(rt, refundOf("rk-3", "rk-p", 6, 20_000, refundBase)), []byte("rk-3")), false); r.outcome() != "APPLIED" || r.points() != 20 {
		t.Errorf("replayed: %s, %d points (%s)", r.outcome(), r.points(), r.detail())
	}
}

// With RefundKeyWarn a refund keyed otherwise is handled as before,
// counted and logged.
func TestRefundKeyWarn(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(func(o *bridge.Options) { o.RefundKeyCheck = bridge.RefundKeyWarn })
	pt, rt := topics.Purchase, topics.RefundRedemption
	if r := s.handle(b, s.record(pt, purchase("rw-p", 7, 100_000)), false); r.outcome() != "APPLIED" {
		t.Fatalf("purchase: %s (%s)", r.outcome(), r.detail())
	}
	for _, id := range []string{"rw-1", "rw-2"} {
		if r := s.handle(b, keyed(s.record(rt, refundOf(id, "rw-p", 7, 10_000, refundBase)), []byte(id)), false); r.outcome() != "APPLIED" || r.points() != 10 {
			t.Errorf("%s: %s, %d points (%s)", id, r.outcome(), r.points(), r.detail())
		}
	}
	if n := value(t, s.metrics.RefundKeyMismatches.WithLabelValues(rt, "warned")); n != 2 {
		t.Errorf("warned counted %v, want 2", n)
	}
	if logs := s.logs.String(); strings.Count(logs, "refund keyed otherwise") != 2 || strings.Count(logs, `"level":"warn","ts"`) != 1 {
		t.Errorf("logs: want the first at warn, the second at debug:\n%s", logs)
	}
}

// Through Kafka: the key the pipeline hands the bridge is the record's.
func TestRefundKeyThroughThePipeline(t *testing.T) {
	s := newStack(t, stackOpts{})
	out := s.follow()
	p := s.producer()
	buy := purchase("rp-p", 8, 100_000)
	p.send(topics.Purchase, buy.LoyaltyID, buy)
	p.flush()
	m := s.start(memberOpts{bridge: s.bridge(nil)})
	defer m.halt(t)
	out.waitAll(t, []string{"rp-p"}, time.Minute)
	good, bad := refundOf("rp-1", "rp-p", 8, 10_000, refundBase), refundOf("rp-2", "rp-p", 8, 10_000, refundBase)
	p.send(topics.RefundRedemption, good.LoyaltyID, good)
	p.send(topics.RefundRedemption, bad.TransactionID, bad)
	p.flush()
	out.waitAll(t, []string{"rp-1", "rp-2"}, time.Minute)
	if r := out.get("rp-1")[0]; r.outcome() != "APPLIED" {
		t.Errorf("keyed by loyaltyId: %s", r.outcome())
	}
	if r := out.get("rp-2")[0]; r.outcome() != "error VALIDATION "+events.ReasonRefundKey {
		t.Errorf("keyed by its transactionId: %s", r.outcome())
	}
}
