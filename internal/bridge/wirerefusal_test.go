package bridge_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// strictOther is a simulator requiring other wire choices than the
// default profile's: accrual dates as strings, redemption dates in epoch
// milliseconds, unset documents as null.
func strictOther() sim.Options {
	return sim.Options{StrictWire: true, Profile: partnerprofile.Profile{AccrualDateType: partnerprofile.DateString,
		RedemptionDateFormat: partnerprofile.DateEpochMillis, UnsetKeyed: partnerprofile.KeyedNull}}
}

// A bridge on the default profile against a partner that requires other
// wire choices: each record the partner refuses for a field the settings
// encode is held (one warning naming the field and the setting to check,
// the held gauge, the failures counted), never an error event, and
// nothing is applied.
func TestWireRefusalHolds(t *testing.T) {
	noPassport := onboarding("wo-1", "ext-wo-1")
	noPassport.PassportNumber = nil
	for _, tc := range []struct {
		name    string
		topic   string
		ev      events.Event
		field   string
		setting string
	}{
		{"accrual date", topics.Purchase, purchase("wa-1", 1, 50000), "transactionDate", "--partner-accrual-date-format"},
		{"redemption date", topics.RefundRedemption, redemption("wr-1", 3, 5), "transactionDate", "--partner-redemption-date-format"},
		{"unset passport", topics.MemberOnboarding, noPassport, "passportNumber", "--partner-unset-keyed-fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, stackOpts{sim: strictOther()})
			b := s.bridge(func(o *bridge.Options) { o.Hold = s.authHold(t) })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := s.handleAsync(ctx, b, s.record(tc.topic, tc.ev))
			s.waitHeld(t)
			logs := s.logs.String()
			if n := strings.Count(logs, "records are held until"); n != 1 {
				t.Errorf("%d warnings of the hold, want 1", n)
			}
			if strings.Contains(logs, "refuses the credentials") {
				t.Errorf("the hold blames the credentials, not the encoding:\n%s", logs)
			}
			for _, want := range []string{"the partner refuses the bridge's encoding of " + tc.field, fmt.Sprintf("the partner refused the %s the bridge encoded", tc.field), tc.setting} {
				if !strings.Contains(logs, want) {
					t.Errorf("logs lack %q", want)
				}
			}
			cancel()
			if r := <-done; r.err == nil || len(r.out) > 0 {
				t.Fatalf("a held record ended: %d outputs, %v", len(r.out), r.err)
			}
			if n := len(s.sim.Ledger()); n != 0 {
				t.Fatalf("%d transactions applied", n)
			}
			if n := s.sim.Calls(sim.EndpointOnboard, http.StatusOK); n != 0 {
				t.Fatalf("%d onboardings applied", n)
			}
		})
	}
}

// The strict simulator's refusals, as a partner that changes its mind
// answers them until it does.
const (
	accrualDateRefusal = `{"statusCode":400,"message":"Bad Request","errors":{"code":"INVALID_REQUEST","errorCode":"INVALID_REQUEST",` +
		`"message":"transactionDate: want a JSON string (epoch-millis string)"}}`
	passportRefusal = `{"statusCode":400,"message":"Bad Request","errors":{"code":"0001","message":"Bad Request","errorCode":"BAD_REQUEST"},` +
		`"data":{"resultUrl":"https://partner.example/onboarding/result?errorCode=MISSING_FIELD&field=passportNumber"}}`
)

// Held records are released once the partner takes the bridge's wire
// choices (here the partner stops refusing them; in production, the
// setting is fixed and the bridge restarted): each gets its result and
// one effect.
func TestWireRefusalReleases(t *testing.T) {
	noPassport := onboarding("wo-2", "ext-wo-2")
	noPassport.PassportNumber = nil
	for _, tc := range []struct {
		name  string
		topic string
		ev    events.Event
		ans   canned
		want  string
	}{
		{"accrual date", topics.Purchase, purchase("wa-2", 1, 50000), canned{"/point-accrual", http.StatusBadRequest, accrualDateRefusal}, "APPLIED"},
		{"unset passport", topics.MemberOnboarding, noPassport, canned{"/user/onboard", http.StatusBadRequest, passportRefusal}, "ONBOARDED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, stackOpts{})
			s.answer.Store(&tc.ans)
			b := s.bridge(func(o *bridge.Options) { o.Hold = s.authHold(t) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := s.handleAsync(ctx, b, s.record(tc.topic, tc.ev))
			s.waitHeld(t)
			s.answer.Store(nil)
			if r := s.output(t, <-done); r.outcome() != tc.want {
				t.Fatalf("released: %s (%s), want %s", r.outcome(), r.detail(), tc.want)
			}
			if gauge(t, s.metrics.AuthHeld) != 0 {
				t.Fatal("still held")
			}
			if tc.topic == topics.MemberOnboarding {
				if n := s.sim.Calls(sim.EndpointOnboard, http.StatusOK); n != 1 {
					t.Fatalf("%d onboardings applied, want 1", n)
				}
			} else if n := s.sim.Effects(tc.ev.ID()); n != 1 {
				t.Fatalf("%d effects, want 1", n)
			}
		})
	}
}

// A refusal the bridge's settings cannot explain stays the record's error
// event: one that names a field while the partner takes other records'
// same field (bad data, not an encoding), a document that has a value,
// or a code the profile does not list.
func TestWireRefusalOfOneRecord(t *testing.T) {
	t.Run("a date others pass with", func(t *testing.T) {
		s := newStack(t, stackOpts{})
		s.answerTx.Store(&txCanned{canned{"/point-accrual", http.StatusBadRequest, `{"statusCode":400,"message":"Bad Request",` +
			`"errors":{"code":"INVALID_REQUEST","message":"transactionDate: before the programme began"}}`}, "wb-1"})
		b := s.bridge(func(o *bridge.Options) { o.Hold = s.authHold(t) })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		bad := s.handleAsync(ctx, b, s.record(topics.Purchase, purchase("wb-1", 1, 50000)))
		s.waitHeld(t)
		// Another record's accrual, with the same encoding, is taken: the
		// held one's refusal is its own.
		if r := s.output(t, <-s.handleAsync(ctx, b, s.record(topics.Purchase, purchase("wb-2", 2, 50000)))); r.outcome() != "APPLIED" {
			t.Fatalf("the other record: %s (%s)", r.outcome(), r.detail())
		}
		if r := s.output(t, <-bad); r.outcome() != "error BUSINESS" {
			t.Fatalf("the refused record: %s, want error BUSINESS", r.outcome())
		}
		if s.sim.Effects("wb-1") != 0 || s.sim.Effects("wb-2") != 1 {
			t.Fatalf("effects %v", s.sim.Ledger())
		}
	})
	for _, tc := range []struct {
		name  string
		topic string
		ev    events.Event
		ans   canned
	}{
		{"a document with a value", topics.MemberOnboarding, onboarding("wo-3", "ext-wo-3"), canned{"/user/onboard", http.StatusBadRequest, passportRefusal}},
		{"a code not listed", topics.Purchase, purchase("wa-3", 1, 50000), canned{"/point-accrual", http.StatusBadRequest,
			strings.ReplaceAll(accrualDateRefusal, "INVALID_REQUEST", "BAD_DATE")}},
		{"another field", topics.Purchase, purchase("wa-4", 1, 50000), canned{"/point-accrual", http.StatusBadRequest,
			strings.ReplaceAll(accrualDateRefusal, "transactionDate:", "transactionAmount:")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, stackOpts{})
			s.answer.Store(&tc.ans)
			b := s.bridge(func(o *bridge.Options) { o.Hold = s.authHold(t) })
			if r := s.handle(b, s.record(tc.topic, tc.ev), true); r.outcome() != "error BUSINESS" {
				t.Fatalf("%s, want error BUSINESS", r.outcome())
			}
			if gauge(t, s.metrics.AuthHeld) != 0 || value(t, s.metrics.AuthFailures) != 0 {
				t.Fatal("held")
			}
		})
	}
}
