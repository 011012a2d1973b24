package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/reconcile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// produceEvents writes evs to topic, keyed by their member.
func (s *replayStack) produceEvents(t *testing.T, topic string, evs ...events.Event) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.st.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, ev := range evs {
		v, err := s.cd.Encode(topic, ev)
		if err != nil {
			t.Fatal(err)
		}
		key := ""
		switch ev := ev.(type) {
		case *events.RedemptionRequested:
			key = ev.LoyaltyID
		case *events.PurchaseRefunded:
			key = ev.LoyaltyID
		}
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte(key), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// simAdmin calls the simulator's admin API with token and returns the
// status.
func (s *replayStack) simAdmin(t *testing.T, method, path, token, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, s.st.SimURL+"/__sim/"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set(sim.AdminHeader, token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// reconcileFindings runs reconcile --json with args and returns its exit
// code, its findings as sorted "KIND id" and its stderr.
func (s *replayStack) reconcileFindings(t *testing.T, args ...string) (int, []string, *reconcile.Report, string) {
	t.Helper()
	code, out, errs := s.cli(t, append([]string{"reconcile", "--json"}, args...)...)
	var rep reconcile.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("reconcile --json: exit %d, %v\nstdout:\n%s\nstderr:\n%s", code, err, out, errs)
	}
	var got []string
	for _, f := range rep.Findings {
		got = append(got, string(f.Kind)+" "+f.TransactionID)
	}
	slices.Sort(got)
	return code, got, &rep, errs
}

// The bridge's own replies reconcile clean; mismatches planted at the
// partner through the admin API are every one found, and only they.
func TestReconcile(t *testing.T) {
	s := newReconcileStack(t)
	stop := s.live(t, nil)
	s.produce(t, nil, "P-0", "P-1", "P-2", "P-3") // members 1 to 4, 5000 VND: 5 points each
	// F-0 refunds P-2: it must find P-2 applied. The bridge reads the
	// topics independently, and a refund read first is ORIGINAL_NOT_FOUND
	// (on a real broker the purchase and refund fetches interleave).
	s.replies(t, s.topics.Purchase+".result", 4)
	refunds := s.topics.RefundRedemption
	now := time.Now()
	m := sim.MemberID
	s.produceEvents(t, refunds,
		&events.RedemptionRequested{TransactionID: "R-0", LoyaltyID: m(5), TransactionDate: now, Amount: 700, UsedPoint: 70},
		&events.RedemptionRequested{TransactionID: "R-1", LoyaltyID: m(6), TransactionDate: now, Amount: 300, UsedPoint: 30},
		&events.PurchaseRefunded{TransactionID: "F-0", OriginalTransactionID: "P-2", LoyaltyID: m(3), RefundAmount: 2500, RefundDate: now},
		&events.RedemptionRequested{TransactionID: "R-big", LoyaltyID: m(7), TransactionDate: now, Amount: 1, UsedPoint: 999_999_999})
	s.replies(t, refunds+".result", 3)
	s.replies(t, refunds+".error", 1) // R-big: INSUFFICIENT_POINT
	stop()

	code, got, rep, errs := s.reconcileFindings(t, "--since", "1h")
	if code != 0 || len(got) != 0 || rep.Checked != 8 || rep.Agreed != 8 {
		t.Fatalf("clean: exit %d, findings %q, checked %d, agreed %d\n%s", code, got, rep.Checked, rep.Agreed, errs)
	}
	if !strings.Contains(errs, "8/8 transactions looked up") {
		t.Errorf("no final progress line:\n%s", errs)
	}

	if st := s.simAdmin(t, http.MethodDelete, "transactions/P-0?kind=ACCRUAL", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("admin without its secret: %d", st)
	}
	for _, p := range []struct{ method, path, body string }{
		{http.MethodDelete, "transactions/P-0?kind=ACCRUAL", ""},                                                         // lost
		{http.MethodPut, "transactions/P-1", `{"kind":"ACCRUAL","amount":4900}`},                                         // amount
		{http.MethodPut, "transactions/R-0", `{"kind":"REDEMPTION","points":7}`},                                         // points
		{http.MethodDelete, "transactions/P-2~cb1?kind=REDEMPTION", ""},                                                  // the refund's clawback (its clawbackTransactionId) lost
		{http.MethodPut, "transactions/R-big", `{"kind":"REDEMPTION","loyaltyId":"` + m(7) + `","points":5,"amount":1}`}, // failed here, applied there
	} {
		if st := s.simAdmin(t, p.method, p.path, simAdminToken, p.body); st != http.StatusOK {
			t.Fatalf("%s %s: %d", p.method, p.path, st)
		}
	}
	code, got, _, errs = s.reconcileFindings(t, "--since", "1h", "--concurrency", "3", "--rate", "500/s")
	want := []string{"DIFFERS P-1", "DIFFERS R-0", "ERROR_BUT_APPLIED R-big", "MISSING F-0", "MISSING P-0"}
	if code != 1 || !slices.Equal(got, want) || !strings.Contains(errs, "5 mismatches with the partner's records") {
		t.Fatalf("planted: exit %d, findings %q, want %q\n%s", code, got, want, errs)
	}

	code, out, _ := s.cli(t, "reconcile", "--since", "1h", "--topic", s.topics.Purchase)
	for _, w := range []string{"MISSING P-0 PurchaseCompleted", "amount: event 5000, partner 4900"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
	if code != 1 || strings.Contains(out, "R-0") {
		t.Errorf("--topic %s: exit %d\n%s", s.topics.Purchase, code, out)
	}
}

// Purchases that failed under an outage although the partner applied them
// are found before the replay, and reconcile clean after it.
func TestReconcileAroundAReplay(t *testing.T) {
	s := newReconcileStack(t)
	applied, lost := ids("ap", 3), ids("lost", 3)
	s.outage(t, nil, applied, lost)
	code, got, _, errs := s.reconcileFindings(t, "--since", "1h")
	want := []string{"ERROR_BUT_APPLIED ap-0", "ERROR_BUT_APPLIED ap-1", "ERROR_BUT_APPLIED ap-2"}
	if code != 1 || !slices.Equal(got, want) {
		t.Fatalf("before the replay: exit %d, findings %q, want %q\n%s", code, got, want, errs)
	}
	if code, out, errs := s.cli(t, "replay", "--from-errors", s.topics.Purchase+".error"); code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	if code, got, _, errs := s.reconcileFindings(t, "--since", "1h"); code != 0 || len(got) != 0 {
		t.Fatalf("after the replay: exit %d, findings %q\n%s", code, got, errs)
	}
}

func TestReconcileUsage(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"reconcile"}, 2, "--since is required"},
		{[]string{"reconcile", "--since", "yesterday"}, 2, `--since: "yesterday": want RFC 3339`},
		{[]string{"reconcile", "--since", "2099-01-01T00:00:00Z"}, 2, "--since 2099-01-01T00:00:00Z is in the future"},
		{[]string{"reconcile", "--since", "2h", "--until", "3h"}, 2, "is not after --since"},
		{[]string{"reconcile", "--since", "1h", "--concurrency", "0"}, 2, "--concurrency 0: must be at least 1"},
		{[]string{"reconcile", "--since", "1h", "--rate", "fast"}, 2, "--rate: "},
		{[]string{"reconcile", "--since", "1h", "--max-transactions", "0"}, 2, "--max-transactions 0: must be at least 1"},
		{[]string{"reconcile", "--since", "1h", "--topic", s.topics.MemberOnboarding}, 2, "member commands (onboard, link, unlink) are out of scope"},
		{[]string{"reconcile", "--since", "1h", "--topic", s.topics.Purchase + ".result"}, 2, fmt.Sprintf("--topic %q: not an input topic", s.topics.Purchase+".result")},
		{[]string{"reconcile", "--since", "1h", "--nope"}, 2, "flag provided but not defined: -nope\nsee 'loyalty-bridge reconcile --help'\n"},
		{[]string{"reconcile", "--since", "1h", "extra"}, 2, `unexpected arguments ["extra"]`},
		{[]string{"reconcile", "-h"}, 0, "Member commands\n(onboard, link, unlink) are out of scope"},
		// An empty window is clean.
		{[]string{"reconcile", "--since", "1h"}, 0, ""},
	} {
		code, _, errs := s.cli(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q; stderr:\n%s", tc.args, code, tc.code, tc.want, errs)
		}
		if code == 2 && (strings.Contains(errs, "usage:") || !strings.Contains(errs, "see 'loyalty-bridge reconcile --help'")) {
			t.Errorf("%v: a usage error is its problem and a pointer to --help:\n%s", tc.args, errs)
		}
	}
}

// A partner that names things its own way (the simulator with another
// profile) and a bridge that runs with its profile: reconcile given the
// same profile, through LOYALTY_BRIDGE_PARTNER_* or the keys of a --config
// file, finds the window clean; given none (the simulator's names), it
// reports every answer UNRECOGNISED rather than guessing MISSING.
func TestReconcileFollowsThePartnerProfile(t *testing.T) {
	other := partnerprofile.Profile{NotFoundCodes: []string{"TXN_NOT_FOUND"}, DuplicateCodes: []string{"TXN_DUPLICATE"},
		AccrualType: "EARN", RedemptionType: "BURN", AppliedStatuses: []string{"COMPLETED"}}
	s := newOpsStack(t, sim.Options{Profile: other})
	s.envs["LOYALTY_BRIDGE_API_PARTNER_KEY"], s.envs["LOYALTY_BRIDGE_API_PARTNER_KEY_ID"] = s.st.PartnerKeyPath, s.st.PartnerKeyID
	stop := s.live(t, func(c *config.Config) { c.Partner.Profile = other.WithDefaults() })
	s.produce(t, nil, "P-0", "P-1", "P-2")
	s.replies(t, s.topics.Purchase+".result", 3) // before F-0, its refund, is read (see TestReconcile)
	refunds, m, now := s.topics.RefundRedemption, sim.MemberID, time.Now()
	s.produceEvents(t, refunds,
		&events.RedemptionRequested{TransactionID: "R-0", LoyaltyID: m(5), TransactionDate: now, Amount: 700, UsedPoint: 70},
		&events.PurchaseRefunded{TransactionID: "F-0", OriginalTransactionID: "P-2", LoyaltyID: m(3), RefundAmount: 2500, RefundDate: now})
	s.replies(t, refunds+".result", 2)
	stop()

	file := filepath.Join(t.TempDir(), "bridge.yaml")
	yml := "partner-not-found-codes: [TXN_NOT_FOUND]\npartner-accrual-type: EARN\npartner-redemption-type: BURN\npartner-applied-statuses: COMPLETED\n"
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, got, rep, errs := s.reconcileFindings(t, "--since", "1h", "--config", file)
	if code != 0 || len(got) != 0 || rep.Checked != 5 || rep.Agreed != 5 {
		t.Fatalf("--config: exit %d, findings %q, checked %d, agreed %d\n%s", code, got, rep.Checked, rep.Agreed, errs)
	}

	code, got, _, errs = s.reconcileFindings(t, "--since", "1h")
	want := []string{"UNRECOGNISED F-0", "UNRECOGNISED P-0", "UNRECOGNISED P-1", "UNRECOGNISED P-2", "UNRECOGNISED R-0"}
	if code != 1 || !slices.Equal(got, want) || !strings.Contains(errs, "5 mismatches with the partner's records") {
		t.Fatalf("not matching: exit %d, findings %q, want %q\n%s", code, got, want, errs)
	}

	for k, v := range map[string]string{
		"LOYALTY_BRIDGE_PARTNER_NOT_FOUND_CODES":  "TXN_NOT_FOUND",
		"LOYALTY_BRIDGE_PARTNER_ACCRUAL_TYPE":     "EARN",
		"LOYALTY_BRIDGE_PARTNER_REDEMPTION_TYPE":  "BURN",
		"LOYALTY_BRIDGE_PARTNER_APPLIED_STATUSES": "COMPLETED",
	} {
		s.envs[k] = v
	}
	if code, got, rep, errs := s.reconcileFindings(t, "--since", "1h"); code != 0 || len(got) != 0 || rep.Agreed != 5 {
		t.Fatalf("LOYALTY_BRIDGE_PARTNER_*: exit %d, findings %q, agreed %d\n%s", code, got, rep.Agreed, errs)
	}
	// A profile that contradicts itself is a usage error, as for run.
	if code, _, errs := s.cli(t, "reconcile", "--since", "1h", "--partner-redemption-type", "EARN"); code != 2 ||
		!strings.Contains(errs, `same transactionType "EARN"`) {
		t.Errorf("contradictory profile: exit %d\n%s", code, errs)
	}
}
