package testkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// A test's world in three lines, for a newcomer to copy (a Go Example has
// no *testing.T, so it is a test): Kafka with the bridge's topics and a
// codec whose schemas are registered, the partner simulator over HTTP, and
// the loyalty client wired to it. Everything is torn down when the test
// ends.
func TestAWorldInThreeLines(t *testing.T) {
	e := testkit.StartEvents(t, testkit.EventsOptions{Partitions: 2})
	partner := testkit.StartSim(t, testkit.SimOptions{Options: sim.Options{Members: 5}})
	client := testkit.NewClient(t, partner, testkit.ClientOptions{})

	v, err := e.Codec.Encode(e.Topics.Purchase, &events.PurchaseCompleted{TransactionID: "T-1", LoyaltyID: sim.MemberID(1),
		Amount: 100_000, TransactionDate: time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client(t).ProduceSync(context.Background(), &kgo.Record{Topic: e.Topics.Purchase, Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.CustomerInfo(context.Background(), sim.MemberID(1)); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 10*time.Second, "a token issued", func() bool { return partner.TokensIssued() > 0 })
}
