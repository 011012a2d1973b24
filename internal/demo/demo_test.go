package demo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

func TestPlanMixesEveryKind(t *testing.T) {
	members := func(i int) string { return fmt.Sprintf("M%d", i) }
	first, refunds := Plan(Options{N: 200, Members: members, Count: 10, Topics: codec.DefaultTopics(), Run: "t", Seed: 1, Now: time.Now()})
	if len(first) != 200 {
		t.Fatalf("%d items", len(first))
	}
	kinds := map[string]int{}
	ids := map[string]bool{}
	for _, it := range first {
		switch {
		case it.Raw != nil:
			kinds["raw"]++
			continue
		case it.Event.Validate() != nil:
			kinds["invalid"]++
		default:
			kinds[string(it.Event.Type())]++
		}
		if ids[it.ID] {
			t.Fatalf("duplicate id %s", it.ID)
		}
		ids[it.ID] = true
	}
	for _, k := range []string{"raw", "invalid", "PurchaseCompleted", "RedemptionRequested", "MemberOnboardRequested",
		"MemberLinkRequested", "MemberUnlinkRequested"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the plan: %v", k, kinds)
		}
	}
	rs := refunds()
	if len(rs) < 2 {
		t.Fatalf("%d refunds", len(rs))
	}
	for _, r := range rs {
		if err := r.Event.Validate(); err != nil {
			t.Fatalf("refund invalid: %v", err)
		}
	}
}

func TestTallyCountsOncePerPlannedID(t *testing.T) {
	ta := NewTally()
	ta.Expect("a", "b")
	if !ta.Result("in", &events.LoyaltyResult{TransactionID: "a", Outcome: events.OutcomeApplied}) {
		t.Fatal("planned id not counted")
	}
	if ta.Result("in", &events.LoyaltyResult{TransactionID: "a", Outcome: events.OutcomeApplied}) {
		t.Fatal("duplicate reply counted twice")
	}
	// An answer read before its id is known (an undecodable record's).
	ta.Error("in", &events.LoyaltyError{TransactionID: "in/0/7", Category: events.CategoryDecode})
	ta.Expect("in/0/7")
	if done, planned := ta.Progress(); done != 2 || planned != 3 {
		t.Fatalf("progress %d/%d", done, planned)
	}
	table := ta.Table()
	if !strings.Contains(table, "error DECODE") || !strings.Contains(table, "APPLIED") || !strings.Contains(table, "2 of 3") {
		t.Fatalf("table:\n%s", table)
	}
}

// The orphan refund is planned with its note, and its row in the table
// says it fails on purpose.
func TestOrphanRefundIsLabelled(t *testing.T) {
	_, refunds := Plan(Options{N: 40, Members: func(i int) string { return fmt.Sprintf("LB%08d", i) }, Count: 5, Run: "r"})
	var orphan *Item
	for _, it := range refunds() {
		if it.Note != "" {
			orphan = &it
		}
	}
	if orphan == nil || orphan.Note != OrphanNote {
		t.Fatalf("no refund planned with the orphan's note: %+v", orphan)
	}
	ta := NewTally()
	ta.Note(orphan.ID, orphan.Note)
	ta.Expect(orphan.ID)
	reason := "ORIGINAL_NOT_FOUND"
	ta.Error("loyalty.refund-redemption", &events.LoyaltyError{TransactionID: orphan.ID, Category: events.CategoryTransientExhausted, Reason: &reason})
	if table := ta.Table(); !strings.Contains(table, "error TRANSIENT_EXHAUSTED ORIGINAL_NOT_FOUND "+OrphanNote) {
		t.Errorf("the orphan's row is not labelled:\n%s", table)
	}
}
