package sim_test

import (
	"net/http"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// The admin API plants disagreements in the partner's records: a record
// changed, created, deleted. Balances and the ledger of effects stay.
func TestAdminTransactions(t *testing.T) {
	e := newEnv(t, nil)
	const tok = "admin-secret"
	lookup := func(tx string) resp {
		t.Helper()
		return e.post(sim.PathLookup, map[string]string{"loyaltyId": sim.MemberID(1), "transactionId": tx})
	}
	d := successData(t, e.post(sim.PathAccrual, accrual(1, "T-1", 5000, 0)), "object").(map[string]any)
	ref := d["bitReference"].(string)

	if r := e.admin(http.MethodPut, "transactions/T-1", tok, `{"kind":"ACCRUAL","points":99,"amount":4000}`); r.status != 200 || r.body["created"] != false {
		t.Fatalf("edit: %d %s", r.status, r.raw)
	}
	rec := successData(t, lookup("T-1"), "object").(map[string]any)
	if rec["transactionPoint"] != 99.0 || rec["transactionAmount"] != 4000.0 || rec["bitReference"] != ref {
		t.Fatalf("edited record %v", rec)
	}
	if m, _ := e.sim.Member(sim.MemberID(1)); m.Balance != 10_005 {
		t.Fatalf("balance %v moved", m.Balance)
	}

	if r := e.admin(http.MethodPut, "transactions/R-9", tok, `{"kind":"REDEMPTION","loyaltyId":"`+sim.MemberID(1)+`","points":7,"amount":70}`); r.status != 200 || r.body["created"] != true {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	rec = successData(t, lookup("R-9"), "object").(map[string]any)
	if rec["transactionType"] != sim.TypeRedemption || rec["transactionPoint"] != 7.0 {
		t.Fatalf("created record %v", rec)
	}

	if r := e.admin(http.MethodDelete, "transactions/T-1?kind=ACCRUAL", tok, ""); r.status != 200 || r.body["deleted"] != true {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	wantError(t, lookup("T-1"), 400, sim.CodeTransactionNotFound)
	wantError(t, e.post(sim.PathLookup, map[string]string{"loyaltyId": sim.MemberID(1), "bitReference": ref}), 400, sim.CodeTransactionNotFound)
	if e.sim.Effects("T-1") != 1 {
		t.Fatalf("ledger changed: %d", e.sim.Effects("T-1"))
	}
	wantError(t, e.admin(http.MethodDelete, "transactions/T-1?kind=ACCRUAL", tok, ""), 400, sim.CodeTransactionNotFound)

	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPut, "transactions/X", `{"kind":"BOGUS","points":1}`},
		{http.MethodPut, "transactions/X", `{"kind":"ACCRUAL","points":1}`},                                     // new: no member, amount
		{http.MethodPut, "transactions/X", `{"kind":"ACCRUAL","loyaltyId":"LB99999999","points":1,"amount":1}`}, // no such member
		{http.MethodPut, "transactions/R-9", `{"kind":"REDEMPTION","points":-1}`},
		{http.MethodPut, "transactions/R-9", `{"kind":"REDEMPTION","nope":1}`},
		{http.MethodDelete, "transactions/R-9", ``}, // no kind
	} {
		wantError(t, e.admin(tc.method, tc.path, tok, tc.body), 400, sim.CodeInvalidRequest)
	}
	if r := e.admin(http.MethodGet, "transactions/R-9", tok, ""); r.status != 405 {
		t.Fatalf("GET: %d", r.status)
	}
	if r := e.admin(http.MethodDelete, "transactions/R-9?kind=REDEMPTION", "", ""); r.status != 401 {
		t.Fatalf("no token: %d", r.status)
	}
}

// Under another profile a planted record answers with the profile's
// transactionType, as the API's own records do, and editing an accrual
// the API made keeps it an accrual.
func TestAdminTransactionsFollowTheProfile(t *testing.T) {
	e := newEnv(t, func(o *sim.Options) { o.Profile = partnerprofile.Profile{AccrualType: "EARN", RedemptionType: "BURN"} })
	const tok = "admin-secret"
	lookup := func(tx string) map[string]any {
		t.Helper()
		return successData(t, e.post(sim.PathLookup, map[string]string{"loyaltyId": sim.MemberID(1), "transactionId": tx}), "object").(map[string]any)
	}
	successData(t, e.post(sim.PathAccrual, accrual(1, "T-1", 5000, 0)), "object")
	if r := e.admin(http.MethodPut, "transactions/T-1", tok, `{"kind":"ACCRUAL","points":99}`); r.status != 200 {
		t.Fatalf("edit: %d %s", r.status, r.raw)
	}
	if rec := lookup("T-1"); rec["transactionType"] != "EARN" || rec["transactionPoint"] != 99.0 {
		t.Fatalf("edited record %v", rec)
	}
	for _, tc := range []struct{ id, kind, want string }{{"A-2", "ACCRUAL", "EARN"}, {"R-2", "REDEMPTION", "BURN"}} {
		body := `{"kind":"` + tc.kind + `","loyaltyId":"` + sim.MemberID(1) + `","points":7,"amount":70}`
		if r := e.admin(http.MethodPut, "transactions/"+tc.id, tok, body); r.status != 200 || r.body["created"] != true {
			t.Fatalf("create %s: %d %s", tc.id, r.status, r.raw)
		}
		if rec := lookup(tc.id); rec["transactionType"] != tc.want {
			t.Fatalf("created %s: %v", tc.id, rec)
		}
	}
}
