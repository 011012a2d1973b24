package service

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// A password rotated at the partner, with every token revoked, while
// records flow: no record becomes an AUTH error event; they are held,
// /readyz is false and the metrics say so. Once the password is accepted
// again, every record completes, each applied exactly once.
func TestRefusedCredentialsHoldRecords(t *testing.T) {
	s := newStack(t)
	cfg := stackConfig(t, s, func(c *config.Config) {
		c.Processing.BreakerOpen = time.Second // the hold's longest wait between probes
		// The password is fixed at the partner, not in a file: the
		// token cache notices at its next login after a refusal.
		c.API.RefusedBackoffMax = time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	svc := runService(ctx, t, cfg)
	base := svc.base
	waitFor(t, "/readyz", 20*time.Second, func() bool { c, _ := get(base + "/readyz"); return c == http.StatusOK })

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var ids []string
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			ev := &events.PurchaseCompleted{TransactionID: fmt.Sprintf("auth-%d", i), LoyaltyID: sim.MemberID(1 + i%10),
				TransactionDate: time.Now(), Amount: 10_000, Currency: "VND"}
			v, err := svc.Codec.Encode(s.Topics.Purchase, ev)
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: s.Topics.Purchase, Key: []byte(ev.LoyaltyID), Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, ev.TransactionID)
		}
	}
	applied := func() float64 {
		return value(svc.Metrics.RecordsCompleted.WithLabelValues(s.Topics.Purchase, string(events.OutcomeApplied)))
	}
	errorEvents := func() float64 {
		return value(svc.Metrics.RecordsCompleted.WithLabelValues(s.Topics.Purchase, "error"))
	}
	produce(0, 10)
	waitFor(t, "the first records", 30*time.Second, func() bool { return applied() == 10 })

	// The partner rotates the password and revokes every token; records
	// keep coming.
	s.Sim.RotateCredentials(sim.CredentialRotation{Password: "rotated-password", RevokeTokens: true})
	produce(10, 20)
	waitFor(t, "the hold", 30*time.Second, func() bool {
		return value(svc.Metrics.AuthHeld) == 1
	})
	waitFor(t, "/readyz false", 10*time.Second, func() bool {
		c, body := get(base + "/readyz")
		return c == http.StatusServiceUnavailable && strings.Contains(body, "credentials")
	})
	if value(svc.Metrics.AuthFailures) == 0 {
		t.Fatal("no auth failure counted")
	}
	// Held through several probes of the hold: nothing completes, nothing
	// is an error event.
	refused := s.Sim.Calls(sim.EndpointToken, 401)
	waitFor(t, "refused probes", 30*time.Second, func() bool { return s.Sim.Calls(sim.EndpointToken, 401) >= refused+2 })
	if got := applied(); got != 10 {
		t.Fatalf("%v records applied while the credentials are refused, want 10", got)
	}
	if got := errorEvents(); got != 0 {
		t.Fatalf("%v error events while the credentials are refused", got)
	}

	// The partner accepts the bridge's password again.
	s.Sim.RotateCredentials(sim.CredentialRotation{Password: sim.DefaultPassword})
	waitFor(t, "every record", 60*time.Second, func() bool { return applied() == 30 })
	waitFor(t, "/readyz", 10*time.Second, func() bool { c, _ := get(base + "/readyz"); return c == http.StatusOK })
	if value(svc.Metrics.AuthHeld) != 0 || svc.Hold.Held() {
		t.Fatal("still held")
	}
	if got := errorEvents(); got != 0 {
		t.Fatalf("%v error events", got)
	}
	for _, id := range ids {
		if n := s.Sim.Effects(id); n != 1 {
			t.Errorf("%s applied %d times", id, n)
		}
	}
	svc.halt(t)
}
