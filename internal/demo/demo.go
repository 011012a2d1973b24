package demo

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// Item is one planned input record: an event to encode, or Raw bytes sent
// as the value as they are (an undecodable record).
type Item struct {
	Topic string
	Key   string
	Event events.Event
	Raw   []byte
	// ID is the transactionId the reply will carry. For Raw records it is
	// empty until the record is produced (the reply names its
	// topic/partition/offset).
	ID string // Note, when set, follows the outcome of this item's answer in the
	// table: a record that fails on purpose says so.
	Note string
}

// Options shape a plan.
type Options struct {
	N       int                // records in phase one; refunds come on top
	Members func(i int) string // loyaltyId of member i (1-based)
	Count   int                // members to spread the traffic over
	Topics  codec.Topics
	Run     string // distinguishes transaction ids of separate runs
	Seed    uint64
	Now     time.Time
}

// Plan returns phase one (everything but refunds) and a function that gives
// phase two: a refund for some of the purchases of phase one.
func Plan(o Options) (first []Item, refunds func() []Item) {
	t := o.Topics.WithDefaults()
	r := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	member := func() string { return o.Members(1 + r.IntN(max(o.Count, 1))) }
	id := func(kind string, i int) string { return fmt.Sprintf("demo-%s-%s-%06d", o.Run, kind, i) }
	var purchases []*events.PurchaseCompleted
	for i := 0; len(first) < o.N; i++ {
		switch k := i % 20; {
		case k == 7: // an invalid purchase: negative amount
			ev := &events.PurchaseCompleted{TransactionID: id("bad", i), LoyaltyID: member(), TransactionDate: o.Now, Amount: -1, Currency: "VND"}
			first = append(first, Item{Topic: t.Purchase, Key: ev.LoyaltyID, Event: ev, ID: ev.TransactionID})
		case k == 13: // garbage bytes: not the Confluent wire format
			first = append(first, Item{Topic: t.Purchase, Key: "garbage", Raw: []byte("not avro at all")})
		case k == 3 || k == 11:
			ev := &events.RedemptionRequested{TransactionID: id("redeem", i), LoyaltyID: member(), TransactionDate: o.Now,
				Amount: float64(10_000 * (1 + r.IntN(20))), UsedPoint: int64(1 + r.IntN(50))}
			first = append(first, Item{Topic: t.RefundRedemption, Key: ev.LoyaltyID, Event: ev, ID: ev.TransactionID})
		case k == 5:
			first = append(first, memberCommands(t, id, i, member(), o.N-len(first))...)
		case k == 17:
			ev := onboarding(id("onboard", i), i)
			first = append(first, Item{Topic: t.MemberOnboarding, Key: ev.ExternalID, Event: ev, ID: ev.TransactionID})
		default:
			ev := &events.PurchaseCompleted{TransactionID: id("buy", i), LoyaltyID: member(), TransactionDate: o.Now,
				Amount: float64(1_000 * (10 + r.IntN(990))), Currency: events.DefaultCurrency}
			purchases = append(purchases, ev)
			first = append(first, Item{Topic: t.Purchase, Key: ev.LoyaltyID, Event: ev, ID: ev.TransactionID})
		}
	}
	return first, func() []Item {
		var out []Item
		for i, p := range purchases {
			if i%4 != 0 {
				continue
			}
			ev := &events.PurchaseRefunded{TransactionID: id("refund", i), OriginalTransactionID: p.TransactionID,
				LoyaltyID: p.LoyaltyID, RefundAmount: p.Amount / 2, RefundDate: o.Now}
			out = append(out, Item{Topic: t.RefundRedemption, Key: ev.LoyaltyID, Event: ev, ID: ev.TransactionID})
		}
		// One refund of a purchase that never happened: it waits for its
		// purchase (parked) and ends as a retryable error, on purpose.
		ev := &events.PurchaseRefunded{TransactionID: id("refund-orphan", 0), OriginalTransactionID: id("never", 0),
			LoyaltyID: o.Members(1), RefundAmount: 1000, RefundDate: o.Now}
		return append(out, Item{Topic: t.RefundRedemption, Key: ev.LoyaltyID, Event: ev, ID: ev.TransactionID, Note: OrphanNote})
	}
}

// OrphanNote labels the demo's refund of a purchase that never happened.
const OrphanNote = "(on purpose: no such purchase)"

// memberCommands: link, link again, unlink, unlink again, keyed by member
// so they stay in order.
func memberCommands(t codec.Topics, id func(string, int) string, i int, loyaltyID string, room int) []Item {
	partner := fmt.Sprintf("partner-%06d", i)
	cmds := []events.Event{
		&events.MemberLinkRequested{TransactionID: id("link", i), LoyaltyID: loyaltyID, PartnerMemberID: partner},
		&events.MemberLinkRequested{TransactionID: id("relink", i), LoyaltyID: loyaltyID, PartnerMemberID: partner},
		&events.MemberUnlinkRequested{TransactionID: id("unlink", i), LoyaltyID: loyaltyID, PartnerMemberID: partner},
		&events.MemberUnlinkRequested{TransactionID: id("reunlink", i), LoyaltyID: loyaltyID, PartnerMemberID: partner},
	}
	var out []Item
	for _, ev := range cmds[:min(len(cmds), room)] {
		out = append(out, Item{Topic: t.MemberOnboarding, Key: loyaltyID, Event: ev, ID: ev.ID()})
	}
	return out
}

func onboarding(txID string, i int) *events.MemberOnboardRequested {
	email := fmt.Sprintf("demo.member.%d@example.com", i)
	idNumber := fmt.Sprintf("0790%08d", i)
	return &events.MemberOnboardRequested{TransactionID: txID, Phone: fmt.Sprintf("+8490%07d", i%10_000_000),
		FullName: "Nguyen Van Demo", Gender: "male", Birthday: "1990-01-15", Email: &email, IsKYC: true,
		IDNumber: &idNumber, PlaceOfIssue: "Ha Noi", PlaceOfBirth: "Ha Noi", IssueDate: "2015-06-01", ExpireDate: "2030-06-01",
		Nationality: "VNM", Address: "1 Demo Street, Ha Noi", ExternalID: fmt.Sprintf("ext-%s", txID)}
}

// Tally counts terminal outputs. Safe for concurrent use.
type Tally struct {
	mu      sync.Mutex
	want    map[string]bool   // planned transaction ids not yet answered
	notes   map[string]string // transaction id → note after its outcome
	planned int
	done    int
	counts  map[string]map[string]int // input topic → outcome or error category → count
	// early holds answers to ids not yet expected: an undecodable record's
	// id is known only once Kafka acknowledged it, and its error event may
	// be read first. Bounded: unrelated replies must not grow it.
	early map[string]earlyAnswer
}

type earlyAnswer struct{ topic, label string }

const maxEarly = 10_000

// NewTally returns an empty Tally.
func NewTally() *Tally {
	return &Tally{want: map[string]bool{}, notes: map[string]string{}, counts: map[string]map[string]int{}, early: map[string]earlyAnswer{}}
}

// Expect adds planned transaction ids.
func (t *Tally) Expect(ids ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if id == "" || t.want[id] {
			continue
		}
		t.planned++
		if a, ok := t.early[id]; ok {
			delete(t.early, id)
			t.count(a.topic, a.label)
			continue
		}
		t.want[id] = true
	}
}

// Note labels id's answer in the table: its row reads outcome, then note.
// Call it before the answer arrives.
func (t *Tally) Note(id, note string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.notes[id] = note
}

// Result records a result of input topic in; it reports whether it answered
// a planned, not yet answered transaction.
func (t *Tally) Result(in string, r *events.LoyaltyResult) bool {
	return t.add(in, string(r.Outcome), r.TransactionID)
}

// Error records an error event of input topic in.
func (t *Tally) Error(in string, e *events.LoyaltyError) bool {
	label := "error " + string(e.Category)
	if e.Reason != nil {
		label += " " + *e.Reason
	}
	return t.add(in, label, e.TransactionID)
}

func (t *Tally) add(in, label, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.want[id] {
		if len(t.early) < maxEarly {
			t.early[id] = earlyAnswer{in, label}
		}
		return false
	}
	delete(t.want, id)
	if n := t.notes[id]; n != "" {
		label += " " + n
	}
	t.count(in, label)
	return true
}

func (t *Tally) count(in, label string) {
	t.done++
	if t.counts[in] == nil {
		t.counts[in] = map[string]int{}
	}
	t.counts[in][label]++
}

// Progress returns answered and planned counts.
func (t *Tally) Progress() (done, planned int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done, t.planned
}

// Table renders the counts as an aligned text table, one row per topic and
// outcome.
func (t *Tally) Table() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	type row struct {
		topic, label string
		n            int
	}
	var rows []row
	for topic, m := range t.counts {
		for label, n := range m {
			rows = append(rows, row{topic, label, n})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].topic != rows[j].topic {
			return rows[i].topic < rows[j].topic
		}
		return rows[i].label < rows[j].label
	})
	w1, w2 := len("TOPIC"), len("OUTCOME")
	for _, r := range rows {
		w1, w2 = max(w1, len(r.topic)), max(w2, len(r.label))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-*s  %7s\n", w1, "TOPIC", w2, "OUTCOME", "RECORDS")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-*s  %-*s  %7d\n", w1, r.topic, w2, r.label, r.n)
	}
	fmt.Fprintf(&b, "%-*s  %-*s  %7d of %d\n", w1, "total", w2, "", t.done, t.planned)
	return b.String()
}
