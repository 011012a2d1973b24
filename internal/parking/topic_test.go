package parking_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/loyalty-bridge/loyalty-bridge/internal/parking"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// The parked topic is created to fit the refund topic, and one that would
// lose parked refunds (compacted, or kept too briefly) is refused saying
// what to change.
func TestEnsure(t *testing.T) {
	const refunds = "loyalty.refund-redemption"
	cl := testkit.StartKafka(t, testkit.KafkaOptions{Topics: []testkit.TopicSet{{Partitions: 6, Names: []string{refunds}}}}).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wait := 15 * time.Minute
	created, err := parking.Ensure(ctx, cl, "g.parked", refunds, wait, -1)
	if err != nil || !created {
		t.Fatalf("Ensure: created %v, %v", created, err)
	}
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, "g.parked")
	if err != nil || len(td["g.parked"].Partitions) != 6 {
		t.Fatalf("created with %d partitions (%v), want the refund topic's 6", len(td["g.parked"].Partitions), err)
	}
	if created, err := parking.Ensure(ctx, cl, "g.parked", refunds, wait, -1); err != nil || created {
		t.Fatalf("again: created %v, %v; want it taken as it is", created, err)
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		configs map[string]*string
		want    string
	}{
		{"compacting", map[string]*string{"cleanup.policy": str("compact")}, "must not compact"},
		{"brief", map[string]*string{"cleanup.policy": str("delete"), "retention.ms": str("60000")}, "below --original-wait plus a day"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "g." + tc.name
			if _, err := adm.CreateTopic(ctx, 6, -1, tc.configs, name); err != nil {
				t.Fatal(err)
			}
			if _, err := parking.Ensure(ctx, cl, name, refunds, wait, -1); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Ensure: %v; want an error saying %q", err, tc.want)
			}
		})
	}
}
