package bridge_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/authhold"
	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// wirePartner is otherPartner that also differs from the default
// profile in every open wire choice and JWT claim.
func wirePartner() partnerprofile.Profile {
	p := otherPartner
	p.AccrualDateType = partnerprofile.DateString
	p.RedemptionDateFormat, p.RedemptionDateType = partnerprofile.DateEpochSeconds, partnerprofile.DateNumber
	p.UnsetKeyed = partnerprofile.KeyedNull
	p.SignRefusedCodes = []string{"SIGN_REFUSED"}
	p.JWT = partnerprofile.JWT{Issuer: "shop-1",
		Sign:       partnerprofile.Claims{Audience: "loyalty", Type: partnerprofile.None, Lifetime: time.Minute, JTI: partnerprofile.JTITransactionID},
		SignClaims: []partnerprofile.SignClaim{{Field: "transactionId", Claim: "txn"}, {Field: "usedPoint", Encoding: partnerprofile.ClaimAsString}, {Field: "transactionDate"}}}
	return p
}

// A bridge configured as another partner requires works against a
// simulator requiring it: accruals, bridge-signed redemptions, refunds'
// clawbacks and onboardings without a passport.
func TestWirePartnerProfile(t *testing.T) {
	s := newStack(t, stackOpts{profile: wirePartner(), sim: sim.Options{Profile: wirePartner(), StrictWire: true}})
	b := s.bridge(nil)
	noPassport := onboarding("ob-1", "ext-1")
	noPassport.PassportNumber = nil
	for _, tc := range []struct {
		topic string
		ev    events.Event
		want  string
	}{
		{topics.Purchase, purchase("pw-1", 1, 50000), "APPLIED"},
		{topics.RefundRedemption, redemption("rw-1", 2, 7), "APPLIED"},
		{topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: "rf-1", OriginalTransactionID: "pw-1", LoyaltyID: sim.MemberID(1),
			RefundAmount: 25000, RefundDate: time.Now()}, "APPLIED"},
		{topics.MemberOnboarding, noPassport, "ONBOARDED"},
	} {
		if r := s.handle(b, s.record(tc.topic, tc.ev), true); r.outcome() != tc.want {
			t.Fatalf("%T: %s (%s), want %s", tc.ev, r.outcome(), r.detail(), tc.want)
		}
	}
}

// A bridge whose sign the partner refuses (its JWT settings are not the
// partner's) holds the record, with one log line and the held gauge,
// instead of writing an error event; a sign passed through from upstream
// and refused stays that record's error.
func TestRefusedSignHolds(t *testing.T) {
	prof := partnerprofile.Profile{JWT: wirePartner().JWT}
	s := newStack(t, stackOpts{profile: prof, sim: sim.Options{StrictWire: true}})
	b := s.bridge(func(o *bridge.Options) { o.Hold = s.authHold(t) })

	ctx, cancel := context.WithCancel(context.Background())
	done := s.handleAsync(ctx, b, s.record(topics.RefundRedemption, redemption("rh-1", 3, 5)))
	s.waitHeld(t)
	logs := s.logs.String()
	for _, want := range []string{"the partner refuses the sign the bridge makes; records are held", "the partner refused the sign the bridge made",
		"sign iss is not " + sim.DefaultClientID, "api sign --explain"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q", want)
		}
	}
	cancel()
	if r := <-done; r.err == nil || len(r.out) > 0 {
		t.Fatalf("a held record ended: %v", r.err)
	}

	// Upstream's own sign, refused: the record's business error.
	sign := "not-a-jwt"
	ev := redemption("rh-2", 3, 5)
	ev.Sign = &sign
	if r := s.handle(s.bridge(nil), s.record(topics.RefundRedemption, ev), true); r.outcome() != "error BUSINESS" {
		t.Fatalf("passed-through sign refused: %s", r.outcome())
	}
}

// authHold is an auth hold over the stack's token cache that reports to
// its metrics, with back-offs short enough for tests.
func (s *stack) authHold(t *testing.T) *authhold.Hold {
	t.Helper()
	hold, err := authhold.New(authhold.Options{Tokens: s.tokens, Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		OnRefused: s.metrics.AuthFailures.Inc,
		OnChange: func(held bool) {
			if held {
				s.metrics.AuthHeld.Set(1)
			} else {
				s.metrics.AuthHeld.Set(0)
			}
		}, Logger: s.log})
	if err != nil {
		t.Fatal(err)
	}
	return hold
}

// handled is what Handle returned for a record.
type handled struct {
	out []*kgo.Record
	err error
}

// handleAsync handles rec in the background until ctx ends.
func (s *stack) handleAsync(ctx context.Context, b *bridge.Bridge, rec *kgo.Record) <-chan handled {
	done := make(chan handled, 1)
	go func() {
		out, err := b.Handle(ctx, rec, pipeline.Meta{Fresh: true})
		done <- handled{out, err}
	}()
	return done
}

// output is the one output of a handled record.
func (s *stack) output(t *testing.T, h handled) reply {
	t.Helper()
	if h.err != nil || len(h.out) != 1 {
		t.Fatalf("Handle: %d outputs, %v", len(h.out), h.err)
	}
	return s.decode(h.out[0])
}

// waitHeld waits for the hold to hold, through a refused probe.
func (s *stack) waitHeld(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		if gauge(t, s.metrics.AuthHeld) != 1 || value(t, s.metrics.AuthFailures) < 2 {
			return false, "the record is not held"
		}
		return true, ""
	})
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
