package service

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// wireProfile differs from the default profile in every open wire choice
// and JWT claim: accrual dates as strings of epoch seconds, redemption
// dates in a layout of its own, unset documents sent as null, other codes,
// and a sign and partner token with other iss, aud, typ, jti and claims.
func wireProfile() partnerprofile.Profile {
	return partnerprofile.Profile{NotFoundCodes: []string{"TXN_NOT_FOUND"}, MemberNotFoundCodes: []string{"NO_SUCH_MEMBER"},
		DuplicateCodes: []string{"TXN_DUPLICATE"}, SignRefusedCodes: []string{"SIGN_REFUSED"},
		AccrualType: "EARN", RedemptionType: "BURN", AppliedStatuses: []string{"COMPLETED"},
		AccrualDateFormat: partnerprofile.DateEpochSeconds, AccrualDateType: partnerprofile.DateString,
		RedemptionDateFormat: "layout:2006-01-02 15:04:05", RedemptionDateType: partnerprofile.DateString,
		UnsetKeyed: partnerprofile.KeyedNull, ApplyWindow: partnerprofile.DefaultApplyWindow,
		JWT: partnerprofile.JWT{Issuer: "shop-1",
			Sign:         partnerprofile.Claims{Audience: "loyalty", Type: partnerprofile.None, Lifetime: time.Minute, JTI: partnerprofile.JTITransactionID},
			PartnerToken: partnerprofile.Claims{Audience: "loyalty-exchange", Type: partnerprofile.None, Lifetime: time.Minute, JTI: partnerprofile.JTINone},
			SignClaims: []partnerprofile.SignClaim{{Field: "transactionId", Claim: "txn"}, {Field: "loyaltyId"},
				{Field: "usedPoint", Encoding: partnerprofile.ClaimAsString}, {Field: "transactionDate"}}}}
}

// The service over Kafka, configured as another partner requires (its
// wire choices, sign and partner-token claims, the exchange grant),
// against a simulator requiring exactly that: purchases, bridge-signed
// redemptions, refunds and onboardings (one without a passport) all get
// their results, and the partner's ledger shows one effect each.
func TestServiceWirePartnerProfile(t *testing.T) {
	s := newStackWith(t, 4, sim.Options{Members: 50, Profile: wireProfile(), StrictWire: true})
	cfg := stackConfig(t, s, func(c *config.Config) {
		c.Partner.Profile = wireProfile()
		c.API.Grant = config.GrantExchange
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	svc := runService(ctx, t, cfg)
	waitFor(t, "/readyz", 20*time.Second, func() bool { c, _ := get(svc.base + "/readyz"); return c == http.StatusOK })

	send := eventProducer(ctx, t, s.Brokers, svc)
	results := followResults(ctx, t, s, svc)

	const n = 6
	var points, onboards []string
	for i := range n {
		id := fmt.Sprintf("wp-%d", i)
		send(s.Topics.Purchase, sim.MemberID(1+i), &events.PurchaseCompleted{TransactionID: id, LoyaltyID: sim.MemberID(1 + i),
			TransactionDate: time.Now(), Amount: 40_000, Currency: "VND"})
		points = append(points, id)
		id = fmt.Sprintf("wr-%d", i)
		send(s.Topics.RefundRedemption, sim.MemberID(10+i), &events.RedemptionRequested{TransactionID: id, LoyaltyID: sim.MemberID(10 + i),
			TransactionDate: time.Now(), Amount: 1000, UsedPoint: int64(1 + i)})
		points = append(points, id)
		ev := onboard(fmt.Sprintf("wo-%d", i), fmt.Sprintf("wire-ext-%d", i))
		switch i % 3 {
		case 1:
			ev.PassportNumber = nil
		case 2:
			ev.IDNumber = nil
		}
		send(s.Topics.MemberOnboarding, ev.ExternalID, ev)
		onboards = append(onboards, ev.TransactionID)
	}
	// A refund is produced once its purchase has its result: read first,
	// it would wait for the purchase (or be ORIGINAL_NOT_FOUND).
	results.wait(t, points[:1], 60*time.Second)
	for i := range n {
		if i%2 == 0 {
			continue
		}
		purchase := fmt.Sprintf("wp-%d", i)
		results.wait(t, []string{purchase}, 60*time.Second)
		id := fmt.Sprintf("wf-%d", i)
		send(s.Topics.RefundRedemption, sim.MemberID(1+i), &events.PurchaseRefunded{TransactionID: id, OriginalTransactionID: purchase,
			LoyaltyID: sim.MemberID(1 + i), RefundAmount: 20_000, RefundDate: time.Now()})
		points = append(points, id)
	}
	results.wait(t, append(points, onboards...), 60*time.Second)

	for _, id := range points {
		if r := results.get(id); r.Outcome != events.OutcomeApplied {
			t.Errorf("%s: %s, want APPLIED", id, r.Outcome)
		}
		partnerID := id
		if original, ok := strings.CutPrefix(id, "wf-"); ok {
			partnerID = bridge.ClawbackID("wp-"+original, 1) // a refund claws back in its purchase's slot
		}
		if got := s.Sim.Effects(partnerID); got != 1 {
			t.Errorf("%s: %d effects at the partner, want 1", partnerID, got)
		}
	}
	if over := s.Sim.EffectsOver(1); len(over) > 0 {
		t.Errorf("applied more than once: %v", over)
	}
	for _, id := range onboards {
		r := results.get(id)
		if r.Outcome != events.OutcomeOnboarded || r.MemberCode == nil {
			t.Errorf("%s: %s, want ONBOARDED with a memberCode", id, r.Outcome)
			continue
		}
		if _, ok := s.Sim.Member(*r.MemberCode); !ok {
			t.Errorf("%s: member %s unknown to the partner", id, *r.MemberCode)
		}
	}
	if got := s.Sim.TotalCalls(sim.EndpointOnboard); got != n {
		t.Errorf("%d onboarding calls, want %d", got, n)
	}
	if s.Sim.TotalCalls(sim.EndpointExchangeToken) == 0 || s.Sim.TotalCalls(sim.EndpointToken) != 0 {
		t.Errorf("tokens not by the exchange grant: %d exchange-token calls, %d password grants",
			s.Sim.TotalCalls(sim.EndpointExchangeToken), s.Sim.TotalCalls(sim.EndpointToken))
	}
	if results.errors() != 0 {
		t.Errorf("%d error events", results.errors())
	}
	svc.halt(t)
}

// onboard is a valid onboarding with both documents.
func onboard(id, externalID string) *events.MemberOnboardRequested {
	email, idn, pp, first, last := "wire@example.org", "079199000001", "C1234567", "Wire", "Partner"
	return &events.MemberOnboardRequested{TransactionID: id, Phone: "+84987650002", FullName: "Wire Partner", FirstName: &first,
		LastName: &last, Gender: "female", Birthday: "1990-02-03", Email: &email, IsKYC: true, IDNumber: &idn, PassportNumber: &pp,
		PlaceOfIssue: "Hanoi", PlaceOfBirth: "Hue", IssueDate: "2015-01-02", ExpireDate: "2035-01-02", Nationality: "VNM",
		Address: "1 Wire Street", ExternalID: externalID}
}

// outputs reads the stack's result and error topics from their start;
// wait polls them.
type outputs struct {
	ctx     context.Context
	svc     *running
	cl      *kgo.Client
	results map[string]*events.LoyaltyResult
	errs    map[string]*events.LoyaltyError
}

func followResults(ctx context.Context, t *testing.T, s *testStack, svc *running) *outputs {
	t.Helper()
	var topics []string
	for _, in := range s.Topics.Inputs() {
		topics = append(topics, s.Topics.ResultTopic(in), s.Topics.ErrorTopic(in))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &outputs{ctx: ctx, svc: svc, cl: cl, results: map[string]*events.LoyaltyResult{}, errs: map[string]*events.LoyaltyError{}}
}

// wait polls the outputs until each of ids has one, or fails t after d.
func (o *outputs) wait(t *testing.T, ids []string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		missing := ""
		for _, id := range ids {
			if o.results[id] == nil && o.errs[id] == nil {
				missing = id
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no output for %s (nor perhaps others) after %s", missing, d)
		}
		pctx, cancel := context.WithTimeout(o.ctx, 200*time.Millisecond)
		o.cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			v, err := o.svc.Codec.Decode(o.ctx, r.Topic, r.Value)
			if err != nil {
				t.Errorf("output on %s: %v", r.Topic, err)
				return
			}
			switch v := v.(type) {
			case *events.LoyaltyResult:
				o.results[string(r.Key)] = v
			case *events.LoyaltyError:
				o.errs[string(r.Key)] = v
			}
		})
		cancel()
	}
}

// get is id's result, or a zero one naming its error event.
func (o *outputs) get(id string) *events.LoyaltyResult {
	if r := o.results[id]; r != nil {
		return r
	}
	if e := o.errs[id]; e != nil {
		return &events.LoyaltyResult{Outcome: events.Outcome(fmt.Sprintf("error %s (%s)", e.Category, e.Detail))}
	}
	return &events.LoyaltyResult{Outcome: "none"}
}

func (o *outputs) errors() int { return len(o.errs) }

// The service on the default profile against a partner requiring
// another's wire choices: the records the partner refuses for them are
// held (the held gauge, the failures counted, /readyz false, its cause
// on Hold.Status), no record
// becomes an error event, and nothing is applied.
func TestServiceWireMismatchHolds(t *testing.T) {
	s := newStackWith(t, 4, sim.Options{Members: 50, Profile: wireProfile(), StrictWire: true})
	cfg := stackConfig(t, s, func(c *config.Config) { c.Processing.BreakerOpen = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	svc := runService(ctx, t, cfg)
	waitFor(t, "/readyz", 20*time.Second, func() bool { c, _ := get(svc.base + "/readyz"); return c == http.StatusOK })

	send := eventProducer(ctx, t, s.Brokers, svc)
	for i := range 5 {
		send(s.Topics.Purchase, sim.MemberID(1+i), &events.PurchaseCompleted{TransactionID: fmt.Sprintf("wm-%d", i), LoyaltyID: sim.MemberID(1 + i),
			TransactionDate: time.Now(), Amount: 10_000, Currency: "VND"})
	}
	ev := onboard("wmo-1", "wire-mismatch-1")
	ev.PassportNumber = nil
	send(s.Topics.MemberOnboarding, ev.ExternalID, ev)

	waitFor(t, "the hold", 30*time.Second, func() bool { return value(svc.Metrics.AuthHeld) == 1 })
	waitFor(t, "/readyz false", 10*time.Second, func() bool {
		c, body := get(svc.base + "/readyz")
		return c == http.StatusServiceUnavailable && strings.Contains(body, "credentials")
	})
	if _, _, cause := svc.Hold.Status(); cause == nil || !strings.Contains(cause.Error(), "the bridge encoded") {
		t.Errorf("held for %v", cause)
	}
	// Held through refused probes: still nothing written, nothing applied.
	refused := value(svc.Metrics.AuthFailures)
	waitFor(t, "refused probes", 30*time.Second, func() bool { return value(svc.Metrics.AuthFailures) >= refused+2 })
	for _, in := range s.Topics.Inputs() {
		for _, outcome := range []string{"error", string(events.OutcomeApplied), string(events.OutcomeOnboarded)} {
			if n := value(svc.Metrics.RecordsCompleted.WithLabelValues(in, outcome)); n != 0 {
				t.Errorf("%s: %v records completed %s while held", in, n, outcome)
			}
		}
	}
	if n := len(s.Sim.Ledger()); n != 0 || s.Sim.Calls(sim.EndpointOnboard, http.StatusOK) != 0 {
		t.Errorf("applied while held: %v, %d onboardings", s.Sim.Ledger(), s.Sim.Calls(sim.EndpointOnboard, http.StatusOK))
	}
	svc.halt(t)
}
