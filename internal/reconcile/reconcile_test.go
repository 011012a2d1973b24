package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/reconcile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var member = sim.MemberID(1)

// harness is a Kafka cluster and srfake with the bridge's topics (named for
// the test), and the simulator over HTTP with the partner API client stack
// that `run` builds. The cluster is the real one realkafka.Seeds names, the
// topics deleted at the end, or kfake.
type harness struct {
	t       testing.TB
	topics  codec.Topics
	brokers []string
	cd      *codec.Codec
	cl      *kgo.Client
	fake    *kfake.Cluster // nil on a real cluster
	sim     *sim.Server
	api     *config.APIClient
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessWith(t, partnerprofile.Profile{})
}

// newHarnessWith runs the simulator as a partner answering with profile p
// (its codes, transaction types and applied status).
func newHarnessWith(t testing.TB, p partnerprofile.Profile) *harness {
	t.Helper()
	return newHarnessOpts(t, harnessOptions{profile: p})
}

// harnessOptions are what a test changes in the harness.
type harnessOptions struct {
	// profile is the simulator's partner profile.
	profile partnerprofile.Profile
	// front sees every partner request before the simulator
	// (testkit.SimOptions.Front): answers the simulator cannot give.
	front func(http.ResponseWriter, *http.Request, http.Handler)
	// fake keeps the harness on kfake even when a real cluster is named:
	// a test that makes the broker fail (kfake's ControlKey).
	fake bool
}

func newHarnessOpts(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	p := o.profile
	h := &harness{t: t, topics: codec.Topics{Purchase: realkafka.Name(t, "purchase"),
		RefundRedemption: realkafka.Name(t, "refund"), MemberOnboarding: realkafka.Name(t, "onboard")}}
	e := testkit.StartEvents(t, testkit.EventsOptions{Topics: h.topics, Partitions: 2, Kafka: testkit.KafkaOptions{Real: !o.fake}})
	h.brokers, h.cd, h.fake = e.Brokers, e.Codec, e.Fake
	h.cl = e.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	srv := testkit.StartSim(t, testkit.SimOptions{Options: sim.Options{Members: 5, InitialBalance: 100_000, Profile: p}, Front: o.front})
	h.sim = srv.Server
	a := config.API{BaseURL: srv.URL, AuthURL: srv.URL, Realm: tokensource.DefaultRealm, ClientID: sim.DefaultClientID,
		ClientSecret: sim.DefaultClientSecret, Username: sim.DefaultUsername, Password: sim.DefaultPassword, Grant: config.GrantPassword,
		Timeout: 5 * time.Second, MaxAttempts: 2, MaxElapsed: 10 * time.Second}
	var err error
	if h.api, err = a.Build(config.BuildOptions{MaxConns: 8, Profile: p.WithDefaults()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.api.Close)
	return h
}

// input writes ev to its input topic (partition 0) and returns its position.
func (h *harness) input(topic string, ev events.Event) events.Source {
	h.t.Helper()
	v, err := h.cd.Encode(topic, ev)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.produce(&kgo.Record{Topic: topic, Key: []byte(member), Value: v})
}

func (h *harness) produce(rec *kgo.Record) events.Source {
	h.t.Helper()
	res := h.cl.ProduceSync(context.Background(), rec)
	if err := res.FirstErr(); err != nil {
		h.t.Fatal(err)
	}
	r := res[0].Record
	return events.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
}

// result writes a result for the input record at src, stamped at (zero: now).
func (h *harness) result(src events.Source, typ events.EventType, id string, o events.Outcome, at time.Time, mod func(*events.LoyaltyResult)) {
	h.t.Helper()
	r := &events.LoyaltyResult{TransactionID: id, EventType: typ, LoyaltyID: ptr(member), Outcome: o, ProcessedAt: time.Now(), Source: src}
	if mod != nil {
		mod(r)
	}
	v, err := h.cd.EncodeResult(src.Topic+".result", r)
	if err != nil {
		h.t.Fatal(err)
	}
	h.produce(&kgo.Record{Topic: src.Topic + ".result", Key: []byte(id), Value: v, Timestamp: at})
}

// failure writes an error event for the input record at src.
func (h *harness) failure(src events.Source, typ *events.EventType, id string, cat events.Category, mod func(*events.LoyaltyError)) {
	h.t.Helper()
	e := &events.LoyaltyError{TransactionID: id, EventType: typ, Category: cat, Detail: "failed", ProcessedAt: time.Now(),
		Source: events.ErrorSource{Topic: src.Topic, Partition: src.Partition, Offset: src.Offset, Timestamp: time.Now()}}
	if mod != nil {
		mod(e)
	}
	v, err := h.cd.EncodeError(src.Topic+".error", e)
	if err != nil {
		h.t.Fatal(err)
	}
	h.produce(&kgo.Record{Topic: src.Topic + ".error", Key: []byte(id), Value: v})
}

// accrue applies an accrual at the simulator through the client and
// writes its input record; it returns the record's position and the
// partner's bitReference.
func (h *harness) accrue(id string, amount float64) (events.Source, string) {
	h.t.Helper()
	ev := &events.PurchaseCompleted{TransactionID: id, LoyaltyID: member, TransactionDate: time.Now(), Amount: amount, Currency: "VND"}
	src := h.input(h.topics.Purchase, ev)
	res, _, err := h.api.Client.Accrue(context.Background(), loyalty.AccrualRequest{LoyaltyID: member, TransactionID: id,
		TransactionDate: loyalty.TransactionDate{Time: ev.TransactionDate}, TransactionAmount: amount})
	if err != nil {
		h.t.Fatal(err)
	}
	return src, res.BitReference
}

// plant creates or changes a partner record through the admin API's Go
// twin, and returns its bitReference.
func (h *harness) plant(kind, id string, points int64, amount float64) string {
	h.t.Helper()
	if _, err := h.sim.EditTransaction(id, sim.TransactionEdit{Kind: kind, LoyaltyID: member, Points: &points, Amount: &amount}); err != nil {
		h.t.Fatal(err)
	}
	t, _, err := h.api.Client.LookupTransaction(context.Background(), loyalty.LookupRequest{LoyaltyID: member, TransactionID: id})
	if err != nil {
		h.t.Fatal(err)
	}
	return t.BitReference
}

func (h *harness) reconciler(mod func(*reconcile.Options)) *reconcile.Reconciler {
	h.t.Helper()
	o := reconcile.Options{Kafka: []kgo.Opt{kgo.SeedBrokers(h.brokers...)}, Codec: h.cd, Partner: h.api.Client}
	if mod != nil {
		mod(&o)
	}
	r, err := reconcile.New(o)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func ptr[T any](v T) *T { return &v }

// findings are a report's findings as "KIND id" lines, sorted.
func findings(rep *reconcile.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, string(f.Kind)+" "+f.TransactionID)
	}
	slices.Sort(out)
	return out
}

// scenario plants one transaction of every case and returns the findings
// reconcile must give with the simulator's profile.
func scenario(h *harness) []string {
	h.t.Helper()
	old := time.Now().Add(-2 * time.Hour)
	acc, red, ref := events.TypePurchaseCompleted, events.TypeRedemptionRequested, events.TypePurchaseRefunded

	// Accruals that agree: APPLIED; ALREADY_APPLIED with the points; an
	// error event then a result (a replay that succeeded).
	src, bit := h.accrue("A-ok", 5000)
	h.result(src, acc, "A-ok", events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) { r.BitReference = &bit })
	src, _ = h.accrue("A-again", 7000)
	h.result(src, acc, "A-again", events.OutcomeAlreadyApplied, time.Time{}, func(r *events.LoyaltyResult) { r.Points = ptr(int64(7)) })
	src, _ = h.accrue("A-replayed", 3000)
	h.failure(src, &acc, "A-replayed", events.CategoryTransientExhausted, nil)
	h.result(src, acc, "A-replayed", events.OutcomeAlreadyApplied, time.Time{}, nil)
	// A failure the partner does not have either.
	src = h.input(h.topics.Purchase, &events.PurchaseCompleted{TransactionID: "A-refused", LoyaltyID: member, TransactionDate: time.Now(), Amount: 1})
	h.failure(src, &acc, "A-refused", events.CategoryBusiness, func(e *events.LoyaltyError) { e.APIErrorCode = ptr("MEMBER_NOT_FOUND") })

	// Mismatches.
	src, _ = h.accrue("A-lost", 5000)
	h.result(src, acc, "A-lost", events.OutcomeApplied, time.Time{}, nil)
	if ok, err := h.sim.DeleteTransaction(sim.TypeAccrual, "A-lost"); !ok || err != nil {
		h.t.Fatal(ok, err)
	}
	src, _ = h.accrue("A-points", 9000)
	h.result(src, acc, "A-points", events.OutcomeAlreadyApplied, time.Time{}, func(r *events.LoyaltyResult) { r.Points = ptr(int64(9)) })
	h.plant(sim.TypeAccrual, "A-points", 90, 9000)
	src, _ = h.accrue("A-amount", 4000)
	h.result(src, acc, "A-amount", events.OutcomeApplied, time.Time{}, nil)
	h.plant(sim.TypeAccrual, "A-amount", 4, 4100)
	src, _ = h.accrue("A-failed-but-applied", 6000)
	h.failure(src, &acc, "A-failed-but-applied", events.CategoryTransientExhausted, nil)

	// Redemptions and h.topics.RefundRedemption (clawbacks are redemptions).
	src = h.input(h.topics.RefundRedemption, &events.RedemptionRequested{TransactionID: "R-ok", LoyaltyID: member, TransactionDate: time.Now(), Amount: 500, UsedPoint: 50})
	bit = h.plant(sim.TypeRedemption, "R-ok", 50, 500)
	h.result(src, red, "R-ok", events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) { r.UsedPoint = ptr(int64(50)); r.BitReference = &bit })
	src = h.input(h.topics.RefundRedemption, &events.RedemptionRequested{TransactionID: "R-used", LoyaltyID: member, TransactionDate: time.Now(), Amount: 500, UsedPoint: 50})
	h.plant(sim.TypeRedemption, "R-used", 40, 500)
	h.result(src, red, "R-used", events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) { r.UsedPoint = ptr(int64(50)) })
	src = h.input(h.topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: "F-ok", OriginalTransactionID: "A-ok", LoyaltyID: member, RefundAmount: 1000, RefundDate: time.Now()})
	bit = h.plant(sim.TypeRedemption, "F-ok", 1, 1000)
	h.result(src, ref, "F-ok", events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) { r.UsedPoint = ptr(int64(1)); r.BitReference = &bit })
	// A clawback posted under another transactionId than the refund's is
	// found by its bitReference.
	src = h.input(h.topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: "F-renamed", OriginalTransactionID: "A-ok", LoyaltyID: member, RefundAmount: 2000, RefundDate: time.Now()})
	bit = h.plant(sim.TypeRedemption, "clawback:F-renamed:1", 2, 2000)
	h.result(src, ref, "F-renamed", events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) { r.UsedPoint = ptr(int64(2)); r.BitReference = &bit })
	// A refund result names its clawback (clawbackTransactionId), which is
	// what is looked up, ahead of its bitReference and its own id.
	src = h.input(h.topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: "F-slot", OriginalTransactionID: "A-ok", LoyaltyID: member, RefundAmount: 3000, RefundDate: time.Now()})
	bit = h.plant(sim.TypeRedemption, "A-ok~cb1", 3, 3000)
	h.result(src, ref, "F-slot", events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) {
		r.UsedPoint, r.Points, r.ClawbackTransactionID, r.BitReference = ptr(int64(3)), ptr(int64(3)), ptr("A-ok~cb1"), &bit
	})
	src = h.input(h.topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: "F-slot-lost", OriginalTransactionID: "A-ok", LoyaltyID: member, RefundAmount: 1000, RefundDate: time.Now()})
	bit = h.plant(sim.TypeRedemption, "F-slot-lost", 1, 1000)
	h.result(src, ref, "F-slot-lost", events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) {
		r.UsedPoint, r.ClawbackTransactionID, r.BitReference = ptr(int64(1)), ptr("A-ok~cb2"), &bit
	})
	// Two results of one refund naming two clawbacks (a copy of it handled
	// elsewhere at the same time): it may have been clawed back twice.
	src = h.input(h.topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: "F-twice", OriginalTransactionID: "A-ok", LoyaltyID: member, RefundAmount: 4000, RefundDate: time.Now()})
	h.plant(sim.TypeRedemption, "A-ok~cb3", 4, 4000)
	h.plant(sim.TypeRedemption, "A-ok~cb4", 4, 4000)
	for _, slot := range []string{"A-ok~cb3", "A-ok~cb4"} {
		h.result(src, ref, "F-twice", events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) {
			r.UsedPoint, r.ClawbackTransactionID = ptr(int64(4)), ptr(slot)
		})
	}
	src = h.input(h.topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: "F-lost", OriginalTransactionID: "A-ok", LoyaltyID: member, RefundAmount: 1000, RefundDate: time.Now()})
	h.result(src, ref, "F-lost", events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) { r.UsedPoint = ptr(int64(1)) })
	src = h.input(h.topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: "F-zero", OriginalTransactionID: "A-ok", LoyaltyID: member, RefundAmount: 1, RefundDate: time.Now()})
	h.result(src, ref, "F-zero", events.OutcomeNoOp, time.Time{}, nil)

	// An error event whose input record the topic does not hold: checked
	// with the original it carries, or not at all.
	orig, err := h.cd.Encode(h.topics.Purchase, &events.PurchaseCompleted{TransactionID: "A-failed-but-applied-2", LoyaltyID: member, TransactionDate: time.Now(), Amount: 6000})
	if err != nil {
		h.t.Fatal(err)
	}
	h.accrue("A-failed-but-applied-2", 6000)
	nowhere := events.Source{Topic: h.topics.Purchase, Partition: 1, Offset: 500}
	h.failure(nowhere, &acc, "A-failed-but-applied-2", events.CategoryTransientExhausted, func(e *events.LoyaltyError) { e.OriginalValue = orig })
	h.failure(events.Source{Topic: h.topics.Purchase, Partition: 1, Offset: 501}, &acc, "A-gone", events.CategoryTransientExhausted, nil)
	// An input record that did not decode: no transaction to look up.
	h.failure(events.Source{Topic: h.topics.Purchase, Partition: 0, Offset: 0}, nil, events.SourceID(h.topics.Purchase, 0, 0), events.CategoryDecode, nil)

	// Before the window: not read.
	h.result(events.Source{Topic: h.topics.Purchase}, acc, "A-before", events.OutcomeApplied, old, nil)

	// A-ok earned 5 points; the slots planted above (~cb1, ~cb3, ~cb4)
	// took 11.
	return []string{
		"CLAWBACK_OVER_EARNED A-ok",
		"DIFFERS A-amount", "DIFFERS A-points", "DIFFERS F-twice", "DIFFERS R-used",
		"ERROR_BUT_APPLIED A-failed-but-applied", "ERROR_BUT_APPLIED A-failed-but-applied-2",
		"MISSING A-lost", "MISSING F-lost", "MISSING F-slot-lost",
		"UNCHECKED A-gone",
	}
}

func TestReconcileFindsEveryPlantedMismatch(t *testing.T) {
	h := newHarness(t)
	purchase, refunds := h.topics.Purchase, h.topics.RefundRedemption
	want := scenario(h)
	var mu sync.Mutex
	var calls, last, planned int
	r := h.reconciler(func(o *reconcile.Options) {
		o.Concurrency, o.Rate = 4, 1000
		o.Progress = func(done, total int) {
			if !mu.TryLock() {
				t.Error("progress calls overlap")
				return
			}
			defer mu.Unlock()
			calls++
			last, planned = done, total
		}
	})
	rep, err := r.Run(context.Background(), reconcile.Request{Inputs: []string{purchase, refunds}, Since: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got := findings(rep); !slices.Equal(got, want) {
		t.Errorf("findings\n got %q\nwant %q\n%s", got, want, rep.Table())
	}
	// 17 transactions looked up; A-gone could not be.
	if rep.Checked != 17 || rep.Agreed != 8 || calls != 17 || last != 17 || planned != 17 {
		t.Errorf("checked %d, agreed %d; progress %d calls, last %d/%d\n%s", rep.Checked, rep.Agreed, calls, last, planned, rep.Table())
	}
	if rep.OK() || rep.Mismatches() != 10 || rep.Count(reconcile.Unchecked) != 1 {
		t.Errorf("OK %v, %d mismatches, %d unchecked", rep.OK(), rep.Mismatches(), rep.Count(reconcile.Unchecked))
	}
	details := map[string]string{}
	for _, f := range rep.Findings {
		details[f.TransactionID] = f.Detail
	}
	for id, want := range map[string]string{
		"A-points":               "points: result 9, partner 90",
		"A-amount":               "amount: event 4000, partner 4100",
		"R-used":                 "points: result 50, partner 40",
		"A-lost":                 "result APPLIED, but the partner has no such transaction",
		"A-failed-but-applied":   "error event TRANSIENT_EXHAUSTED, but the partner has it applied (6 points)",
		"A-gone":                 "its input record is gone",
		"F-lost":                 "no such transaction",
		"F-slot-lost":            "no such transaction (clawback A-ok~cb2)",
		"F-twice":                "clawbackTransactionId: result A-ok~cb4, another result A-ok~cb3",
		"A-failed-but-applied-2": "applied",
	} {
		if !strings.Contains(details[id], want) {
			t.Errorf("%s: %q, want %q", id, details[id], want)
		}
	}
	if rep.Skipped["NO_OP results (a refund that claws back nothing writes nothing)"] != 1 ||
		rep.Skipped["error events of input records that do not decode (no transaction to look up)"] != 1 {
		t.Errorf("skipped %v", rep.Skipped)
	}
	tab := rep.Table()
	for _, s := range []string{"transactions looked up  17", "MISSING", "DIFFERS A-points"} {
		if !strings.Contains(strings.Join(strings.Fields(tab), " "), strings.Join(strings.Fields(s), " ")) {
			t.Errorf("table lacks %q:\n%s", s, tab)
		}
	}
	if b, err := json.Marshal(rep); err != nil || !strings.Contains(string(b), `"kind":"MISSING"`) || strings.Contains(string(b), member) {
		t.Errorf("JSON (no loyaltyId in it): %s, %v", b, err)
	}
}

// A clean window reports nothing, and --until leaves later replies out.
func TestReconcileCleanWindow(t *testing.T) {
	h := newHarness(t)
	purchase, refunds := h.topics.Purchase, h.topics.RefundRedemption
	src, bit := h.accrue("A-1", 5000)
	h.result(src, events.TypePurchaseCompleted, "A-1", events.OutcomeApplied, time.Now().Add(-30*time.Minute),
		func(r *events.LoyaltyResult) { r.BitReference = &bit })
	src, _ = h.accrue("A-2", 5000)
	h.result(src, events.TypePurchaseCompleted, "A-2", events.OutcomeApplied, time.Time{}, nil)
	if ok, err := h.sim.DeleteTransaction(sim.TypeAccrual, "A-2"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	rep, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{purchase, refunds},
		Since: time.Now().Add(-time.Hour), Until: time.Now().Add(-10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Checked != 1 || rep.Agreed != 1 || rep.Replies != 1 {
		t.Fatalf("OK %v, checked %d, agreed %d, replies %d\n%s", rep.OK(), rep.Checked, rep.Agreed, rep.Replies, rep.Table())
	}
	if strings.Contains(rep.Table(), "interrupted") {
		t.Errorf("a run that was not stopped reports lookups interrupted:\n%s", rep.Table())
	}
}

// What an answer means is the partner profile's alone: a profile that
// names another redemption type has the simulator's redemption records
// reported unrecognised, never taken for applied or missing, while what
// it does name (accruals, the not-found code) is read as usual.
func TestReconcileUnrecognisedAnswers(t *testing.T) {
	h := newHarness(t)
	purchase, refunds := h.topics.Purchase, h.topics.RefundRedemption
	src, _ := h.accrue("A-1", 5000)
	h.result(src, events.TypePurchaseCompleted, "A-1", events.OutcomeApplied, time.Time{}, nil)
	src = h.input(refunds, &events.RedemptionRequested{TransactionID: "R-1", LoyaltyID: member, TransactionDate: time.Now(), Amount: 500, UsedPoint: 50})
	h.plant(sim.TypeRedemption, "R-1", 50, 500)
	h.result(src, events.TypeRedemptionRequested, "R-1", events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) { r.UsedPoint = ptr(int64(50)) })
	src = h.input(refunds, &events.RedemptionRequested{TransactionID: "R-2", LoyaltyID: member, TransactionDate: time.Now(), Amount: 500, UsedPoint: 50})
	h.result(src, events.TypeRedemptionRequested, "R-2", events.OutcomeApplied, time.Time{}, nil)
	r := h.reconciler(func(o *reconcile.Options) { o.Profile = partnerprofile.Profile{RedemptionType: "BURN"} })
	rep, err := r.Run(context.Background(), reconcile.Request{Inputs: []string{purchase, refunds}, Since: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := findings(rep), []string{"MISSING R-2", "UNRECOGNISED R-1"}; !slices.Equal(got, want) || rep.Agreed != 1 {
		t.Fatalf("findings %q, want %q; agreed %d", got, want, rep.Agreed)
	}
	for _, f := range rep.Findings {
		if f.Kind == reconcile.NotRecognised && !strings.Contains(f.Detail, `not in the partner profile (transactionType "REDEMPTION")`) {
			t.Errorf("the detail does not say what was not recognised: %q", f.Detail)
		}
	}
}

// otherPartner names nothing the simulator names by default.
var otherPartner = partnerprofile.Profile{NotFoundCodes: []string{"TXN_NOT_FOUND"}, DuplicateCodes: []string{"TXN_DUPLICATE"},
	AccrualType: "EARN", RedemptionType: "BURN", AppliedStatuses: []string{"COMPLETED"}}

// A partner that answers with its own codes, types and statuses (the
// simulator with another profile): reconcile told its profile finds a
// clean window clean; told the simulator's names instead, it reports every
// answer unrecognised (the records' type, the failure's not-found code)
// rather than guessing "missing" or "applied".
func TestReconcileFollowsThePartnerProfile(t *testing.T) {
	h := newHarnessWith(t, otherPartner)
	purchase := h.topics.Purchase
	for _, id := range []string{"A-1", "A-2"} {
		src, bit := h.accrue(id, 5000)
		h.result(src, events.TypePurchaseCompleted, id, events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) {
			r.Points, r.BitReference = ptr(int64(5)), &bit
		})
	}
	// A failure the partner does not have either: TXN_NOT_FOUND.
	src := h.input(purchase, &events.PurchaseCompleted{TransactionID: "A-refused", LoyaltyID: member, TransactionDate: time.Now(), Amount: 1})
	acc := events.TypePurchaseCompleted
	h.failure(src, &acc, "A-refused", events.CategoryBusiness, nil)
	q := reconcile.Request{Inputs: []string{purchase}, Since: time.Now().Add(-time.Hour)}

	rep, err := h.reconciler(func(o *reconcile.Options) { o.Profile = otherPartner }).Run(context.Background(), q)
	if err != nil || !rep.OK() || rep.Checked != 3 || rep.Agreed != 3 {
		t.Fatalf("matching: %v, checked %d, agreed %d\n%s", err, rep.Checked, rep.Agreed, rep.Table())
	}

	rep, err = h.reconciler(nil).Run(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := findings(rep), []string{"UNRECOGNISED A-1", "UNRECOGNISED A-2", "UNRECOGNISED A-refused"}; !slices.Equal(got, want) || rep.Agreed != 0 {
		t.Fatalf("not matching: findings %q, want %q; agreed %d", got, want, rep.Agreed)
	}
	for _, f := range rep.Findings {
		want := `(transactionType "EARN")`
		if f.TransactionID == "A-refused" {
			want = `(errorCode "TXN_NOT_FOUND")`
		}
		if !strings.Contains(f.Detail, want) {
			t.Errorf("%s: %q, want %s", f.TransactionID, f.Detail, want)
		}
	}
}

// A record the partner holds with a failed status took no effect: against
// a result it is NOT_APPLIED (not MISSING: the partner has the
// transactionId), against error events only it agrees. A transactionId
// that names a transaction of the other kind is no such transaction from
// a partner keyed by id alone (keyed by id and type, the default, the
// answer is not recognised: the accrual may be beside it).
func TestReconcileNotApplied(t *testing.T) {
	h := newHarness(t)
	purchase := h.topics.Purchase
	acc := events.TypePurchaseCompleted
	src, _ := h.accrue("A-failed", 5000)
	h.result(src, acc, "A-failed", events.OutcomeApplied, time.Time{}, nil)
	src, _ = h.accrue("A-failed-too", 5000)
	h.failure(src, &acc, "A-failed-too", events.CategoryTransientExhausted, nil)
	src = h.input(purchase, &events.PurchaseCompleted{TransactionID: "A-other", LoyaltyID: member, TransactionDate: time.Now(), Amount: 500})
	h.plant(sim.TypeRedemption, "A-other", 5, 500)
	h.result(src, acc, "A-other", events.OutcomeApplied, time.Time{}, nil)
	// The simulator's applied status is this partner's failed one.
	r := h.reconciler(func(o *reconcile.Options) {
		o.Profile = partnerprofile.Profile{AppliedStatuses: []string{"COMPLETED"}, FailedStatuses: []string{partnerprofile.DefaultAppliedStatus},
			TransactionKey: partnerprofile.KeyID}
	})
	rep, err := r.Run(context.Background(), reconcile.Request{Inputs: []string{purchase}, Since: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := findings(rep), []string{"MISSING A-other", "NOT_APPLIED A-failed"}; !slices.Equal(got, want) || rep.Agreed != 1 || rep.Mismatches() != 2 {
		t.Fatalf("findings %q, want %q; agreed %d\n%s", got, want, rep.Agreed, rep.Table())
	}
	details := map[string]string{}
	for _, f := range rep.Findings {
		details[f.TransactionID] = f.Detail
	}
	if !strings.Contains(details["A-failed"], `status "SUCCESS", a failed status`) ||
		!strings.Contains(details["A-other"], "no such transaction (the transactionId names a REDEMPTION, not this accrual)") {
		t.Errorf("details %q", details)
	}
	if tab := strings.Join(strings.Fields(rep.Table()), " "); !strings.Contains(tab, "NOT_APPLIED 1") {
		t.Errorf("table lacks the NOT_APPLIED count:\n%s", rep.Table())
	}
}

// A result for a member the partner does not know (its member-not-found
// code) is MISSING, said so: a reconcile pointed at the wrong partner
// environment shows it on every result.
func TestReconcileUnknownMember(t *testing.T) {
	h := newHarness(t)
	purchase := h.topics.Purchase
	nobody := "LB99999999"
	src := h.input(purchase, &events.PurchaseCompleted{TransactionID: "A-nobody", LoyaltyID: nobody, TransactionDate: time.Now(), Amount: 500})
	h.result(src, events.TypePurchaseCompleted, "A-nobody", events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) { r.LoyaltyID = &nobody })
	rep, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{purchase}, Since: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := findings(rep), []string{"MISSING A-nobody"}; !slices.Equal(got, want) {
		t.Fatalf("findings %q, want %q\n%s", got, want, rep.Table())
	}
	if d := rep.Findings[0].Detail; !strings.Contains(d, `does not know its member (answered "MEMBER_NOT_FOUND")`) {
		t.Errorf("detail %q", d)
	}
}

// A profile that contradicts itself is refused before anything runs.
func TestReconcileRefusesAContradictoryProfile(t *testing.T) {
	_, err := reconcile.New(reconcile.Options{Codec: &codec.Codec{}, Partner: &loyalty.Client{},
		Profile: partnerprofile.Profile{AccrualType: "X", RedemptionType: "X"}})
	if err == nil || !strings.Contains(err.Error(), `same transactionType "X"`) {
		t.Fatalf("err %v", err)
	}
}

// A partner that does not answer leaves transactions unchecked, not
// passed: the report is not OK.
func TestReconcilePartnerNotAnswering(t *testing.T) {
	h := newHarness(t)
	purchase := h.topics.Purchase
	src, _ := h.accrue("A-1", 5000)
	h.result(src, events.TypePurchaseCompleted, "A-1", events.OutcomeApplied, time.Time{}, nil)
	h.sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, RetryAfter: -1, Endpoints: []string{sim.EndpointLookup}})
	rep, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{purchase}, Since: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got := findings(rep); rep.OK() || !slices.Equal(got, []string{"UNCHECKED A-1"}) || !strings.Contains(rep.Findings[0].Detail, "lookup failed") {
		t.Fatalf("%q %+v", got, rep.Findings)
	}
}

// A window with more transactions than Options.MaxTransactions fails
// before any lookup, rather than holding them all.
func TestReconcileBoundsTheWindow(t *testing.T) {
	h := newHarness(t)
	purchase := h.topics.Purchase
	for _, id := range []string{"A-1", "A-2"} {
		src, _ := h.accrue(id, 5000)
		h.result(src, events.TypePurchaseCompleted, id, events.OutcomeApplied, time.Time{}, nil)
	}
	looked := false
	r := h.reconciler(func(o *reconcile.Options) {
		o.MaxTransactions = 1
		o.Progress = func(int, int) { looked = true }
	})
	_, err := r.Run(context.Background(), reconcile.Request{Inputs: []string{purchase}, Since: time.Now().Add(-time.Hour)})
	if err == nil || !strings.Contains(err.Error(), "more than 1 transactions") || looked {
		t.Fatalf("err %v, looked up %v", err, looked)
	}
}

// The window ends at each partition's first offset at or after Until, as
// replay and Kafka's tools end it: a result stamped before Until but
// written after one stamped later is outside, even when the later one is
// the partition's first record; with Until past both, both are read.
func TestReconcileWindowEndsAtTheFirstOffsetAfterUntil(t *testing.T) {
	until := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for _, tc := range []struct {
		name    string
		until   time.Time
		replies int
	}{
		{"the first record is past until", until, 0},
		{"both records are before until", until.Add(3 * time.Minute), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			purchase := h.topics.Purchase
			late, _ := h.accrue("A-late", 5000)
			early, _ := h.accrue("A-early", 5000)
			// Partition 0 of the result topic: offset 0 stamped after
			// until, offset 1 before it.
			h.result(late, events.TypePurchaseCompleted, "A-late", events.OutcomeApplied, until.Add(time.Minute), nil)
			h.result(early, events.TypePurchaseCompleted, "A-early", events.OutcomeApplied, until.Add(-time.Minute), nil)
			rep, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{purchase},
				Since: until.Add(-time.Hour), Until: tc.until})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Replies != tc.replies || rep.Agreed != tc.replies || len(rep.Findings) != 0 {
				t.Fatalf("%d replies read, %d agreed, findings %q; want %d read and agreed\n%s", rep.Replies, rep.Agreed, findings(rep), tc.replies, rep.Table())
			}
		})
	}
}

// A transaction's input record is the one its first reply names, at any
// offset, the first of a partition included: its amount is compared with
// the partner's. A second input record with the same transactionId (a
// producer's duplicate with another amount, answered ALREADY_APPLIED) is
// not the one the partner applied.
func TestReconcileComparesTheInputTheFirstReplyNames(t *testing.T) {
	acc := events.TypePurchaseCompleted
	for _, tc := range []struct {
		name      string
		duplicate bool // a second input record of A-1, for 9,000 VND, answered ALREADY_APPLIED
		partner   float64
		want      []string
	}{
		{"the partition's first record, amount differs", false, 4100, []string{"DIFFERS A-1"}},
		{"the partition's first record, amount agrees", false, 4000, nil},
		{"a later duplicate with another amount", true, 4000, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			first, _ := h.accrue("A-1", 4000)
			if first.Offset != 0 || first.Partition != 0 {
				t.Fatalf("the first input record is at %+v, want partition 0 offset 0", first)
			}
			h.plant(sim.TypeAccrual, "A-1", 4, tc.partner)
			h.result(first, acc, "A-1", events.OutcomeApplied, time.Time{}, nil)
			if tc.duplicate {
				dup := h.input(h.topics.Purchase, &events.PurchaseCompleted{TransactionID: "A-1", LoyaltyID: member, TransactionDate: time.Now(), Amount: 9000, Currency: "VND"})
				h.result(dup, acc, "A-1", events.OutcomeAlreadyApplied, time.Time{}, nil)
			}
			rep, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{h.topics.Purchase}, Since: time.Now().Add(-time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if got := findings(rep); !slices.Equal(got, tc.want) || rep.Checked != 1 {
				t.Fatalf("findings %q, want %q; checked %d\n%s", got, tc.want, rep.Checked, rep.Table())
			}
			if len(tc.want) > 0 && !strings.Contains(rep.Findings[0].Detail, "amount: event 4000, partner 4100") {
				t.Errorf("detail %q", rep.Findings[0].Detail)
			}
		})
	}
}

// A reply naming an input position the topic does not hold yet (at or
// past its end: another cluster's topic, a topic created again) is judged
// without its input record, as one whose record is gone, rather than
// waiting for a record that may never come.
func TestReconcileReplyNamingAPositionPastTheEnd(t *testing.T) {
	h := newHarness(t)
	src, _ := h.accrue("A-1", 4000)
	past := src
	past.Offset++ // the partition's end: A-1 is its only record
	h.result(past, events.TypePurchaseCompleted, "A-1", events.OutcomeApplied, time.Time{}, nil)
	// Bounded: the wait for a record that never comes fails the test.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := h.reconciler(nil).Run(ctx, reconcile.Request{Inputs: []string{h.topics.Purchase}, Since: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 0 || rep.Agreed != 1 {
		t.Fatalf("findings %q, agreed %d\n%s", findings(rep), rep.Agreed, rep.Table())
	}
}

// A run stopped during its lookups returns ctx's error with the report
// so far, which counts the lookups not made and is not OK.
func TestReconcileStoppedDuringLookups(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"A-1", "A-2", "A-3"} {
		src, _ := h.accrue(id, 5000)
		h.result(src, events.TypePurchaseCompleted, id, events.OutcomeApplied, time.Time{}, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := h.reconciler(func(o *reconcile.Options) {
		o.Concurrency = 1
		o.Progress = func(done, _ int) {
			if done == 1 {
				cancel() // before the next lookup starts: one at a time
			}
		}
	})
	rep, err := r.Run(ctx, reconcile.Request{Inputs: []string{h.topics.Purchase}, Since: time.Now().Add(-time.Hour)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if rep == nil || rep.Interrupted != 2 || rep.OK() || !strings.Contains(rep.Table(), "not looked up (interrupted)") {
		t.Fatalf("report %+v, want 2 lookups interrupted and not OK", rep)
	}
}

// refund writes a refund's input record and a result naming its clawback
// slot, with the points the result says it clawed back.
func (h *harness) refund(id, original string, amount float64, o events.Outcome, slot string, points int64) {
	h.t.Helper()
	src := h.input(h.topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: id, OriginalTransactionID: original, LoyaltyID: member,
		RefundAmount: amount, RefundDate: time.Now()})
	h.result(src, events.TypePurchaseRefunded, id, o, time.Time{}, func(r *events.LoyaltyResult) {
		r.UsedPoint, r.Points, r.RequestedPoints, r.ClawbackTransactionID = ptr(points), ptr(points), ptr(points), ptr(slot)
	})
}

// Each refund result agrees with the partner on its own; what reconcile
// sums across them: an original whose clawback slots took more than it
// earned, and one slot named by the results of several refunds (an
// equal-amount twin taken for a refund's own). A refund answered twice
// (a replay's ALREADY_APPLIED) naming its own slot again is neither.
func TestReconcileSumsClawbacks(t *testing.T) {
	h := newHarness(t)
	// 100,000 VND earn 100 points; the slots are what the bridge writes,
	// planted as the partner would hold them.
	h.accrue("P-over", 100_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-over", 1), 60, 60_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-over", 2), 60, 60_000)
	h.refund("F-o1", "P-over", 60_000, events.OutcomeApplied, "P-over~cb1", 60)
	h.refund("F-o2", "P-over", 60_000, events.OutcomeApplied, "P-over~cb2", 60)

	h.accrue("P-shared", 100_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-shared", 1), 30, 30_000)
	h.refund("F-s1", "P-shared", 30_000, events.OutcomeApplied, "P-shared~cb1", 30)
	h.refund("F-s2", "P-shared", 30_000, events.OutcomeAlreadyApplied, "P-shared~cb1", 30)
	h.refund("F-s3", "P-shared", 30_000, events.OutcomeAlreadyApplied, "P-shared~cb1", 30)

	h.accrue("P-full", 100_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-full", 1), 50, 50_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-full", 2), 50, 50_000)
	h.refund("F-f1", "P-full", 50_000, events.OutcomeApplied, "P-full~cb1", 50)
	h.refund("F-f1", "P-full", 50_000, events.OutcomeAlreadyApplied, "P-full~cb1", 50)
	h.refund("F-f2", "P-full", 50_000, events.OutcomeApplied, "P-full~cb2", 50)

	rep, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{h.topics.RefundRedemption}, Since: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CLAWBACK_OVER_EARNED P-over", "SHARED_CLAWBACK P-shared~cb1"}
	if got := findings(rep); !slices.Equal(got, want) || rep.Agreed != 7 || rep.Originals != 3 || rep.OK() || rep.Mismatches() != 2 {
		t.Fatalf("findings %q, want %q; agreed %d, originals %d\n%s", got, want, rep.Agreed, rep.Originals, rep.Table())
	}
	for _, f := range rep.Findings {
		want := map[reconcile.FindingKind]string{
			reconcile.ClawbackOverEarned: "original earned 100 points; its clawbacks took 120 (P-over~cb1 60, P-over~cb2 60): 20 more than it earned",
			reconcile.SharedClawback:     "named by the results of 3 refunds (F-s1, F-s2, F-s3)",
		}[f.Kind]
		if !strings.Contains(f.Detail, want) || f.EventType != events.TypePurchaseRefunded || f.Topic != h.topics.RefundRedemption {
			t.Errorf("%s %s: %q, want %q", f.Kind, f.TransactionID, f.Detail, want)
		}
	}
	tab := strings.Join(strings.Fields(rep.Table()), " ")
	for _, s := range []string{"CLAWBACK_OVER_EARNED 1", "SHARED_CLAWBACK 1", "originals whose clawbacks were summed 3"} {
		if !strings.Contains(tab, s) {
			t.Errorf("table lacks %q:\n%s", s, rep.Table())
		}
	}
	if b, err := json.Marshal(rep); err != nil || !strings.Contains(string(b), `"kind":"SHARED_CLAWBACK"`) || strings.Contains(string(b), member) {
		t.Errorf("JSON (no loyaltyId in it): %s, %v", b, err)
	}
}

// Clawbacks that add up to exactly what the original earned are clean.
func TestReconcileClawbacksClean(t *testing.T) {
	h := newHarness(t)
	h.accrue("P-1", 100_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-1", 1), 70, 70_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-1", 2), 30, 30_000)
	h.refund("F-1", "P-1", 70_000, events.OutcomeApplied, "P-1~cb1", 70)
	h.refund("F-2", "P-1", 30_000, events.OutcomeApplied, "P-1~cb2", 30)
	rep, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{h.topics.RefundRedemption}, Since: time.Now().Add(-time.Hour)})
	if err != nil || !rep.OK() || rep.Agreed != 2 || rep.Originals != 1 {
		t.Fatalf("%v: OK %v, agreed %d, originals %d\n%s", err, rep.OK(), rep.Agreed, rep.Originals, rep.Table())
	}
}

// A clawback finding points at the first result that shows it: an
// original over-earned at the earliest result naming one of its slots, a
// slot shared by exactly two refunds at the second refund's first result
// naming it (not at its replay's).
func TestReconcileClawbackFindingsNameTheFirstResult(t *testing.T) {
	h := newHarness(t)
	h.accrue("P-over", 100_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-over", 1), 60, 60_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-over", 2), 60, 60_000)
	h.refund("F-o1", "P-over", 60_000, events.OutcomeApplied, "P-over~cb1", 60) // result 0
	h.refund("F-o2", "P-over", 60_000, events.OutcomeApplied, "P-over~cb2", 60) // result 1

	h.accrue("P-two", 100_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-two", 1), 30, 30_000)
	h.refund("F-a", "P-two", 30_000, events.OutcomeApplied, "P-two~cb1", 30)        // result 2
	h.refund("F-b", "P-two", 30_000, events.OutcomeAlreadyApplied, "P-two~cb1", 30) // result 3
	h.refund("F-b", "P-two", 30_000, events.OutcomeAlreadyApplied, "P-two~cb1", 30) // result 4: a replay's

	rep, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{h.topics.RefundRedemption}, Since: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	results := h.topics.ResultTopic(h.topics.RefundRedemption)
	want := map[string]string{
		"CLAWBACK_OVER_EARNED P-over": results + "/0/0",
		"SHARED_CLAWBACK P-two~cb1":   results + "/0/3",
	}
	if got := findings(rep); len(got) != len(want) {
		t.Fatalf("findings %q, want those of %v\n%s", got, want, rep.Table())
	}
	for _, f := range rep.Findings {
		if at, ok := want[string(f.Kind)+" "+f.TransactionID]; !ok || f.Reply != at {
			t.Errorf("%s %s at %s, want at %s", f.Kind, f.TransactionID, f.Reply, at)
		}
		if f.Kind == reconcile.SharedClawback && !strings.Contains(f.Detail, "named by the results of 2 refunds (F-a, F-b)") {
			t.Errorf("shared slot: %q", f.Detail)
		}
	}
}

// What the accrual's own result already reported for an original (its
// answer not recognised, its lookup failed) the sum of its clawbacks does
// not report again; an original with no loyaltyId anywhere is unchecked,
// and not counted as interrupted.
func TestReconcileClawbacksSayOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		profile partnerprofile.Profile // the reconciler's; the simulator keeps its own
		plant   func(h *harness)
		want    []string
	}{
		{"unrecognised", partnerprofile.Profile{AccrualType: "EARN"}, func(h *harness) {
			src, _ := h.accrue("P-1", 100_000)
			h.result(src, events.TypePurchaseCompleted, "P-1", events.OutcomeApplied, time.Time{}, nil)
			h.plant(sim.TypeRedemption, bridge.ClawbackID("P-1", 1), 10, 10_000)
			h.refund("F-1", "P-1", 10_000, events.OutcomeApplied, "P-1~cb1", 10)
		}, []string{"UNRECOGNISED P-1"}},
		{"lookups failing", partnerprofile.Profile{}, func(h *harness) {
			src, _ := h.accrue("P-1", 100_000)
			h.result(src, events.TypePurchaseCompleted, "P-1", events.OutcomeApplied, time.Time{}, nil)
			h.refund("F-1", "P-1", 10_000, events.OutcomeApplied, "P-1~cb1", 10)
			h.sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, RetryAfter: -1, Endpoints: []string{sim.EndpointLookup}})
		}, []string{"UNCHECKED F-1", "UNCHECKED P-1"}},
		{"no loyaltyId", partnerprofile.Profile{}, func(h *harness) {
			// The refund's input record is not there, and its result names
			// no member.
			h.result(events.Source{Topic: h.topics.RefundRedemption, Partition: 1, Offset: 900}, events.TypePurchaseRefunded, "F-9",
				events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) {
					r.LoyaltyID, r.UsedPoint, r.ClawbackTransactionID = nil, ptr(int64(10)), ptr("P-9~cb1")
				})
		}, []string{"UNCHECKED F-9", "UNCHECKED P-9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			tc.plant(h)
			rep, err := h.reconciler(func(o *reconcile.Options) { o.Profile = tc.profile }).Run(context.Background(),
				reconcile.Request{Inputs: []string{h.topics.Purchase, h.topics.RefundRedemption}, Since: time.Now().Add(-time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if got := findings(rep); !slices.Equal(got, tc.want) || rep.Interrupted != 0 {
				t.Fatalf("findings %q, want %q; interrupted %d\n%s", got, tc.want, rep.Interrupted, rep.Table())
			}
		})
	}
}

// The sum of an original's clawbacks takes every slot the bridge can
// write, up to the last (bridge.MaxClawbacks), an applied slot of 0 points
// as 0 points, and stops at the first slot not found at or past the last
// slot a result names: the bridge fills slots in order, so a slot past a
// missing one is no clawback of the bridge's.
func TestReconcileSumsTheSlotsTheBridgeCanWrite(t *testing.T) {
	h := newHarness(t)
	// P-last: slots 1..63 take a point each and the last one 40: 103 of
	// the 100 earned.
	h.accrue("P-last", 100_000)
	for k := 1; k <= bridge.MaxClawbacks; k++ {
		p := int64(1)
		if k == bridge.MaxClawbacks {
			p = 40
		}
		h.plant(sim.TypeRedemption, bridge.ClawbackID("P-last", k), p, float64(p)*1000)
	}
	h.refund("F-last", "P-last", 40_000, events.OutcomeApplied, bridge.ClawbackID("P-last", bridge.MaxClawbacks), 40)

	// P-zero: an applied slot of 0 points is a count of points.
	h.accrue("P-zero", 100_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-zero", 1), 0, 100)
	h.refund("F-zero", "P-zero", 100, events.OutcomeApplied, "P-zero~cb1", 0)

	// P-gap: the result names ~cb2, which the partner lacks; ~cb3 (80
	// points) is past it and not summed: 30 of the 100 earned.
	h.accrue("P-gap", 100_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-gap", 1), 30, 30_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-gap", 3), 80, 80_000)
	h.refund("F-gap", "P-gap", 30_000, events.OutcomeApplied, "P-gap~cb2", 30)

	// P-eight: eight slots, each named in the detail.
	h.accrue("P-eight", 100_000)
	for k := 1; k <= 8; k++ {
		h.plant(sim.TypeRedemption, bridge.ClawbackID("P-eight", k), 15, 15_000)
	}
	h.refund("F-eight", "P-eight", 15_000, events.OutcomeApplied, "P-eight~cb8", 15)

	rep, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{h.topics.RefundRedemption}, Since: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CLAWBACK_OVER_EARNED P-eight", "CLAWBACK_OVER_EARNED P-last", "MISSING F-gap"}
	if got := findings(rep); !slices.Equal(got, want) || rep.Originals != 4 {
		t.Fatalf("findings %q, want %q; originals %d\n%s", got, want, rep.Originals, rep.Table())
	}
	// A detail names the first eight slots and counts the rest.
	details := map[string]string{
		"P-last":  "original earned 100 points; its clawbacks took 103 (P-last~cb1 1, P-last~cb2 1, P-last~cb3 1, P-last~cb4 1, P-last~cb5 1, P-last~cb6 1, P-last~cb7 1, P-last~cb8 1 and 56 more): 3 more",
		"P-eight": "original earned 100 points; its clawbacks took 120 (P-eight~cb1 15, P-eight~cb2 15, P-eight~cb3 15, P-eight~cb4 15, P-eight~cb5 15, P-eight~cb6 15, P-eight~cb7 15, P-eight~cb8 15): 20 more",
	}
	for _, f := range rep.Findings {
		if want, ok := details[f.TransactionID]; ok && !strings.Contains(f.Detail, want) {
			t.Errorf("%s: %q, want %q", f.TransactionID, f.Detail, want)
		}
	}
}

// pointsAt answers the partner's lookups of the transactions it names with
// their transactionPoint replaced: amounts the simulator refuses to plant
// (it holds at most 1e15 points).
func pointsAt(points map[string]int64) func(http.ResponseWriter, *http.Request, http.Handler) {
	return func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if !strings.HasSuffix(r.URL.Path, "/lookup-transaction-id") {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct{ TransactionID string }
		p, ok := int64(0), false
		if json.Unmarshal(body, &req) == nil {
			p, ok = points[req.TransactionID]
		}
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		var answer map[string]any
		d := json.NewDecoder(rec.Body)
		d.UseNumber()
		if err := d.Decode(&answer); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		data, ok := answer["data"].(map[string]any)
		if !ok {
			http.Error(w, "the simulator's lookup answer has no data", http.StatusInternalServerError)
			return
		}
		data["transactionPoint"] = json.Number(strconv.FormatInt(p, 10))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		_ = json.NewEncoder(w).Encode(answer)
	}
}

// The sum of an original's clawbacks is exact up to math.MaxInt64: a slot
// of MaxInt64 points alone is summed (and over what was earned); one more
// point would overflow, and the sum is reported not made rather than
// wrapped to a negative that looks clean.
func TestReconcileSumsUpToMaxInt64(t *testing.T) {
	h := newHarnessOpts(t, harnessOptions{front: pointsAt(map[string]int64{
		"P-max~cb1": math.MaxInt64, "P-over~cb1": math.MaxInt64, "P-over~cb2": 1,
	})})
	h.accrue("P-max", 100_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-max", 1), 1, 1000)
	h.refund("F-max", "P-max", 1000, events.OutcomeApplied, "P-max~cb1", math.MaxInt64)
	h.accrue("P-over", 100_000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-over", 1), 1, 1000)
	h.plant(sim.TypeRedemption, bridge.ClawbackID("P-over", 2), 1, 1000)
	h.refund("F-over", "P-over", 1000, events.OutcomeApplied, "P-over~cb2", 1)

	rep, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{h.topics.RefundRedemption}, Since: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CLAWBACK_OVER_EARNED P-max", "UNRECOGNISED P-over"}
	if got := findings(rep); !slices.Equal(got, want) || rep.Originals != 2 {
		t.Fatalf("findings %q, want %q; originals %d\n%s", got, want, rep.Originals, rep.Table())
	}
	details := map[string]string{
		"P-max":  "its clawbacks took 9223372036854775807 (P-max~cb1 9223372036854775807): 9223372036854775707 more than it earned",
		"P-over": "clawbacks not summed: P-over~cb2 has transactionPoint 1, not a count of points",
	}
	for _, f := range rep.Findings {
		if want := details[f.TransactionID]; !strings.Contains(f.Detail, want) {
			t.Errorf("%s: %q, want %q", f.TransactionID, f.Detail, want)
		}
	}
}

// Slots are looked up only as far as the bridge can have written them: for
// a member the partner does not know, the original and the one slot a
// result names, not every slot up to bridge.MaxClawbacks.
func TestReconcileClawbackLookupsStopAtAnUnknownMember(t *testing.T) {
	h := newHarness(t)
	nobody := "LB99999999"
	src := h.input(h.topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: "F-1", OriginalTransactionID: "P-1", LoyaltyID: nobody,
		RefundAmount: 1000, RefundDate: time.Now()})
	h.result(src, events.TypePurchaseRefunded, "F-1", events.OutcomeApplied, time.Time{}, func(r *events.LoyaltyResult) {
		r.LoyaltyID, r.UsedPoint, r.ClawbackTransactionID = &nobody, ptr(int64(1)), ptr("P-1~cb1")
	})
	rep, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{h.topics.RefundRedemption}, Since: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// The refund's own lookups (its slot, then its bitReference or id),
	// and the sum's: the original and ~cb1.
	if n := h.sim.TotalCalls(sim.EndpointLookup); n > 6 || rep.Originals != 1 {
		t.Fatalf("%d lookups, originals %d\n%s", n, rep.Originals, rep.Table())
	}
}

// A window over a topic the cluster does not have fails, naming it,
// rather than reporting an empty window clean: its first query (the start
// offsets) says so, not a later one that a partition's error slipped past.
func TestReconcileMissingTopic(t *testing.T) {
	h := newHarness(t)
	missing := h.topics.Purchase + "-missing"
	_, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{missing}, Since: time.Now().Add(-time.Hour)})
	if err == nil || !strings.Contains(err.Error(), "start offsets of "+missing) {
		t.Fatalf("err %v, want the start offsets of %s refused", err, missing)
	}
}

// A window whose offsets the broker does not give fails, naming the query
// and the topic, rather than reading a partition it could not bound (or
// none, and reporting the window clean): the start offsets, the end
// offsets (last stable), and the offsets at since and at until, each
// refused for one partition of every topic; and so do the input records'
// start and end offsets, refused for the input topic alone.
func TestReconcileWindowOffsetsRefused(t *testing.T) {
	since, until := time.Now().Add(-time.Hour).Truncate(time.Millisecond), time.Now().Add(time.Hour).Truncate(time.Millisecond)
	for _, tc := range []struct {
		name      string
		timestamp int64 // of the ListOffsets queries refused
		inputOnly bool  // refused for the input topic only (not its replies')
		want      string
	}{
		{"start", -2, false, "start offsets of %s"},
		{"end", -1, false, "end offsets of %s"},
		{"since", since.UnixMilli(), false, "offsets of %s at " + since.Format(time.RFC3339)},
		{"until", until.UnixMilli(), false, "offsets of %s at " + until.Format(time.RFC3339)},
		{"input start", -2, true, "start offsets of %s"},
		{"input end", -1, true, "end offsets of %s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessOpts(t, harnessOptions{fake: true})
			purchase := h.topics.Purchase
			src, _ := h.accrue("A-1", 5000)
			h.result(src, events.TypePurchaseCompleted, "A-1", events.OutcomeApplied, time.Time{}, nil)
			h.fake.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				h.fake.KeepControl()
				req := kreq.(*kmsg.ListOffsetsRequest)
				refused := false
				for _, rt := range req.Topics {
					for _, rp := range rt.Partitions {
						refused = refused || rp.Partition == 1 && rp.Timestamp == tc.timestamp && (!tc.inputOnly || rt.Topic == purchase)
					}
				}
				if !refused {
					return nil, nil, false
				}
				resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
				for _, rt := range req.Topics {
					st := kmsg.NewListOffsetsResponseTopic()
					st.Topic = rt.Topic
					for _, rp := range rt.Partitions {
						sp := kmsg.NewListOffsetsResponseTopicPartition()
						sp.Partition, sp.Offset = rp.Partition, -1
						if rp.Partition == 1 {
							sp.ErrorCode = kerr.UnknownServerError.Code
						}
						st.Partitions = append(st.Partitions, sp)
					}
					resp.Topics = append(resp.Topics, st)
				}
				return resp, nil, true
			})
			_, err := h.reconciler(nil).Run(context.Background(), reconcile.Request{Inputs: []string{purchase}, Since: since, Until: until})
			want := regexp.MustCompile(fmt.Sprintf(regexp.QuoteMeta(tc.want), regexp.QuoteMeta(purchase)+`\S*`) + ": " + regexp.QuoteMeta(kerr.UnknownServerError.Message))
			if err == nil || !want.MatchString(err.Error()) {
				t.Fatalf("err %v, want it to match %s", err, want)
			}
		})
	}
}
