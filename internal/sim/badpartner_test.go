package sim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// lookupByID looks transactionId up for member 1.
func (e *env) lookupByID(tx string) resp {
	e.t.Helper()
	return e.post(sim.PathLookup, map[string]string{"loyaltyId": sim.MemberID(1), "transactionId": tx})
}

// A late write is answered 504 and applied once when it lands; a repeat
// sent before then meets the duplicate policy as if the first had never
// come.
func TestLateApplyExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  sim.DuplicatePolicy
		repeat  bool
		effects int // of T-1 once the late write has landed
	}{
		{"alone", sim.DuplicateReject, false, 1},
		{"repeat, reject", sim.DuplicateReject, true, 1},
		{"repeat, return-original", sim.DuplicateReturnOriginal, true, 1},
		{"repeat, apply", sim.DuplicateApply, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(o *sim.Options) { o.DuplicatePolicy = tc.policy })
			e.sim.SetFaults(sim.Faults{LateApplyRate: 1, LateApplyDelay: time.Hour})
			if r := e.post(sim.PathAccrual, accrual(1, "T-1", 5000, 1)); r.status != http.StatusGatewayTimeout {
				t.Fatalf("status %d, want 504: %s", r.status, r.raw)
			}
			if r := e.post(sim.PathRedemption, e.redemption(1, "R-1", 7, 10, "2026-11-22", nil)); r.status != http.StatusGatewayTimeout {
				t.Fatalf("redemption: status %d, want 504: %s", r.status, r.raw)
			}
			if c := e.sim.Counters(); c.LatePending != 2 || c.LateLanded != 0 || e.sim.Effects("T-1") != 0 {
				t.Fatalf("before landing: counters %+v, ledger %v", c, e.sim.Ledger())
			}
			e.sim.SetFaults(sim.Faults{})
			wantError(t, e.lookupByID("T-1"), 400, sim.CodeTransactionNotFound)
			balance := 10_000.0 + 5 - 7
			if tc.repeat {
				successData(t, e.post(sim.PathAccrual, accrual(1, "T-1", 5000, 1)), "object")
				balance += 5 * float64(tc.effects-1)
			}
			if r := e.admin(http.MethodPost, "late-applies/flush", "admin-secret", ""); r.status != 200 {
				t.Fatalf("flush: %s", r.raw)
			}
			e.flushLate() // nothing left: no second effect
			if got := e.sim.Effects("T-1"); got != tc.effects || e.sim.Effects("R-1") != 1 {
				t.Fatalf("effects of T-1 %d, want %d; ledger %v", got, tc.effects, e.sim.Ledger())
			}
			if m, _ := e.sim.Member(sim.MemberID(1)); m.Balance != balance {
				t.Fatalf("balance %v, want %v", m.Balance, balance)
			}
			if c := e.sim.Counters(); c.LatePending != 0 || c.LateLanded != 2 {
				t.Fatalf("after landing: counters %+v", c)
			}
			successData(t, e.lookupByID("T-1"), "object")
		})
	}
}

// Without a flush, a late write lands after LateApplyDelay, once.
func TestLateApplyAfterDelay(t *testing.T) {
	e := newEnv(t, nil)
	e.sim.SetFaults(sim.Faults{LateApplyRate: 1, LateApplyDelay: 20 * time.Millisecond, Endpoints: []string{sim.EndpointAccrual}})
	if r := e.post(sim.PathAccrual, accrual(1, "T-1", 5000, 1)); r.status != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504", r.status)
	}
	waitFor(t, func() bool { return e.sim.Counters().LateLanded == 1 })
	if c := e.sim.Counters(); e.sim.Effects("T-1") != 1 || c.LatePending != 0 {
		t.Fatalf("counters %+v, ledger %v", c, e.sim.Ledger())
	}
}

// A client that gives up during injected latency leaves a write that
// still lands; Close drops the writes still pending.
func TestLateApplyClientGaveUpAndClose(t *testing.T) {
	e := newEnv(t, nil)
	e.bearer()
	e.sim.SetFaults(sim.Faults{Latency: time.Hour, LateApplyRate: 1, LateApplyDelay: time.Hour, Endpoints: []string{sim.EndpointAccrual}})
	for _, tx := range []string{"T-gone", "T-closed"} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		if _, _, _, err := e.rawAccrual(ctx, tx); err == nil {
			t.Fatal("answered despite an hour of latency")
		}
		cancel()
	}
	waitFor(t, func() bool { return e.sim.Counters().LatePending == 2 })
	if e.sim.Effects("T-gone") != 0 || e.sim.Effects("T-closed") != 0 {
		t.Fatalf("applied before landing: ledger %v", e.sim.Ledger())
	}
	e.flushLate()
	if e.sim.Effects("T-gone") != 1 || e.sim.Effects("T-closed") != 1 {
		t.Fatalf("ledger %v, want each once", e.sim.Ledger())
	}

	e2 := newEnv(t, nil)
	e2.sim.SetFaults(sim.Faults{LateApplyRate: 1, LateApplyDelay: time.Hour})
	if r := e2.post(sim.PathAccrual, accrual(1, "T-1", 5000, 1)); r.status != http.StatusGatewayTimeout {
		t.Fatalf("status %d", r.status)
	}
	if !finishes(5*time.Second, e2.sim.Close) {
		t.Fatal("Close did not return within 5s")
	}
	e2.flushLate()
	if c := e2.sim.Counters(); e2.sim.Effects("T-1") != 0 || c.LatePending != 0 || c.LateDropped != 1 {
		t.Fatalf("after Close: counters %+v, ledger %v", c, e2.sim.Ledger())
	}
	// After Close a late write is still answered 504, and dropped.
	if r := e2.post(sim.PathAccrual, accrual(1, "T-2", 5000, 1)); r.status != http.StatusGatewayTimeout {
		t.Fatalf("after Close: status %d", r.status)
	}
	if c := e2.sim.Counters(); e2.sim.Effects("T-2") != 0 || c.LatePending != 0 || c.LateDropped != 2 {
		t.Fatalf("after Close: counters %+v, ledger %v", c, e2.sim.Ledger())
	}
}

// A late redemption's sign is checked, and its jti used up, when the
// request arrives: a sign that expires before the write lands does not
// refuse it then, and a retry whose sign reuses the jti (the profile's
// jti transaction-id) is refused as a replay, so that under DuplicateApply
// the redemption still applies once, the late write being the one.
func TestLateRedemptionSignCheckedOnArrival(t *testing.T) {
	jtiIsID := func(c claims) { c["jti"] = "R-1" }
	t.Run("expired by landing", func(t *testing.T) {
		e := newEnv(t, func(o *sim.Options) { o.DuplicatePolicy = sim.DuplicateApply })
		e.sim.SetFaults(sim.Faults{LateApplyRate: 1, LateApplyDelay: time.Hour})
		if r := e.post(sim.PathRedemption, e.redemption(1, "R-1", 7, 10, "2026-11-22", jtiIsID)); r.status != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504: %s", r.status, r.raw)
		}
		e.clk.Advance(time.Hour) // the sign's exp and the skew are long past
		e.flushLate()
		if got := e.sim.Effects("R-1"); got != 1 {
			t.Fatalf("effects %d, want 1: the sign was valid when the request arrived", got)
		}
	})
	t.Run("retry reusing the jti", func(t *testing.T) {
		e := newEnv(t, func(o *sim.Options) { o.DuplicatePolicy = sim.DuplicateApply })
		e.sim.SetFaults(sim.Faults{LateApplyRate: 1, LateApplyDelay: time.Hour})
		if r := e.post(sim.PathRedemption, e.redemption(1, "R-1", 7, 10, "2026-11-22", jtiIsID)); r.status != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504: %s", r.status, r.raw)
		}
		e.sim.SetFaults(sim.Faults{})
		r := e.post(sim.PathRedemption, e.redemption(1, "R-1", 7, 10, "2026-11-22", jtiIsID))
		wantError(t, r, 400, sim.CodeInvalidSign)
		e.flushLate()
		if got := e.sim.Effects("R-1"); got != 1 {
			t.Fatalf("effects %d, want 1 (the late write)", got)
		}
		if m, _ := e.sim.Member(sim.MemberID(1)); m.Balance != 10_000-7 {
			t.Fatalf("balance %v, want %v", m.Balance, 10_000-7)
		}
		if c := e.sim.Counters(); c.LateLanded != 1 {
			t.Fatalf("counters %+v", c)
		}
	})
	t.Run("refused on arrival never lands", func(t *testing.T) {
		e := newEnv(t, nil)
		e.sim.SetFaults(sim.Faults{LateApplyRate: 1, LateApplyDelay: time.Hour})
		bad := e.redemption(1, "R-1", 7, 10, "2026-11-22", func(c claims) { c["usedPoint"] = 8 })
		if r := e.post(sim.PathRedemption, bad); r.status != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504: %s", r.status, r.raw)
		}
		if c := e.sim.Counters(); c.LatePending != 0 {
			t.Fatalf("a refused write is pending: %+v", c)
		}
	})
}

// A flush racing the timers applies each late write once, and returns
// only when every write it could see has landed.
func TestLateApplyFlushRacesTimers(t *testing.T) {
	e := newEnv(t, func(o *sim.Options) { o.DuplicatePolicy = sim.DuplicateApply })
	e.sim.SetFaults(sim.Faults{LateApplyRate: 1, LateApplyDelay: 5 * time.Millisecond, Endpoints: []string{sim.EndpointAccrual}})
	const n = 40
	for i := range n {
		if r := e.post(sim.PathAccrual, accrual(1, fmt.Sprintf("T-%d", i), 5000, 1)); r.status != http.StatusGatewayTimeout {
			t.Fatalf("status %d", r.status)
		}
		if i%8 != 7 {
			continue
		}
		// Three flushes at once reach the same writes as each other
		// and as the timers.
		var wg sync.WaitGroup
		var stuck atomic.Int32
		for range 3 {
			wg.Go(func() {
				if !finishes(5*time.Second, e.sim.FlushLateApplies) {
					stuck.Add(1)
				}
			})
		}
		wg.Wait()
		if stuck.Load() > 0 {
			t.Fatalf("%d concurrent flushes did not return within 5s", stuck.Load())
		}
	}
	// Once flushed, every write has landed: flush waits for those a timer
	// took just before it too.
	e.flushLate()
	if c := e.sim.Counters(); c.LatePending != 0 || c.LateLanded != n {
		t.Fatalf("after the flush: counters %+v, want all %d landed", c, n)
	}
	if over := e.sim.EffectsOver(1); len(over) != 0 {
		t.Fatalf("applied twice: %v", over)
	}
	for i := range n {
		if got := e.sim.Effects(fmt.Sprintf("T-%d", i)); got != 1 {
			t.Fatalf("T-%d applied %d times", i, got)
		}
	}
}

// Lookups see a write only LookupLag after it was applied, by
// transactionId and by bitReference alike.
func TestLookupLag(t *testing.T) {
	e := newEnv(t, nil)
	e.sim.SetFaults(sim.Faults{LookupLag: 10 * time.Second})
	a := successData(t, e.post(sim.PathAccrual, accrual(1, "T-1", 5000, 1)), "object").(map[string]any)
	byBit := map[string]string{"loyaltyId": sim.MemberID(1), "bitReference": a["bitReference"].(string)}
	for _, step := range []struct {
		advance time.Duration
		found   bool
	}{{0, false}, {9 * time.Second, false}, {time.Second, true}} {
		e.clk.Advance(step.advance)
		for _, r := range []resp{e.lookupByID("T-1"), e.post(sim.PathLookup, byBit)} {
			if step.found {
				successData(t, r, "object")
			} else {
				wantError(t, r, 400, sim.CodeTransactionNotFound)
			}
		}
	}
}

// numbersIn returns the numbers in v and whether any field was null.
func numbersIn(v any) (numbers []string, nulls bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				nulls = true
			}
			if _, isNumber := e.(float64); isNumber {
				numbers = append(numbers, k)
			}
			n, z := numbersIn(e)
			numbers, nulls = append(numbers, n...), nulls || z
		}
	case []any:
		for _, e := range x {
			n, z := numbersIn(e)
			numbers, nulls = append(numbers, n...), nulls || z
		}
	}
	return numbers, nulls
}

// Under NullNumbersRate 1 no answer's data carries a number: each is null
// or left out, both forms show up, and the state is what the writes did.
func TestNullNumbers(t *testing.T) {
	e := newEnv(t, nil)
	successData(t, e.post(sim.PathAccrual, accrual(1, "T-1", 5000, 1)), "object")
	e.sim.SetFaults(sim.Faults{NullNumbersRate: 1})
	forms := map[bool]int{} // nulls seen → answers
	for i := range 12 {
		for _, tc := range []struct {
			name string
			r    func() resp
			// fields: numbers in the healthy answer, which must be gone
			fields []string
		}{
			{"lookup", func() resp { return e.lookupByID("T-1") }, []string{"transactionPoint", "transactionAmount"}},
			{"redemption", func() resp {
				return e.post(sim.PathRedemption, e.redemption(1, "R-"+string(rune('a'+i)), 1, 10, "2026-11-22", nil))
			}, []string{"usedPoint"}},
			{"accrual", func() resp { return e.post(sim.PathAccrual, accrual(1, "T-n"+string(rune('a'+i)), 5000, 1)) }, []string{"sponsorId"}},
			{"user-profile", func() resp { return e.get(sim.PathCustomerInfo + sim.MemberID(1)) }, nil},
		} {
			data := successData(t, tc.r(), "object")
			numbers, nulls := numbersIn(data)
			if len(numbers) > 0 {
				t.Fatalf("%s: numbers %v left in %v", tc.name, numbers, data)
			}
			m := data.(map[string]any)
			for _, f := range tc.fields {
				if v, present := m[f]; present != nulls || v != nil {
					t.Fatalf("%s: %s present %v (%v), want present only as null", tc.name, f, present, v)
				}
			}
			forms[nulls]++
		}
	}
	if forms[true] == 0 || forms[false] == 0 {
		t.Fatalf("forms seen %v: want both null and absent", forms)
	}
	if m, _ := e.sim.Member(sim.MemberID(1)); m.Balance != 10_000+5*13-12 {
		t.Fatalf("balance %v", m.Balance)
	}
}

// A transactionId shared by an accrual and a redemption: a lookup by the
// id alone answers the record SharedIDLookup chooses; each bitReference
// reaches its own record.
func TestSharedIDLookup(t *testing.T) {
	for _, tc := range []struct {
		choice, first, want string
	}{
		{"", "accrual", "ACCRUAL"},
		{sim.SharedIDAccrual, "redemption", "ACCRUAL"},
		{sim.SharedIDRedemption, "accrual", "REDEMPTION"},
		{sim.SharedIDLatest, "accrual", "REDEMPTION"},
		{sim.SharedIDLatest, "redemption", "ACCRUAL"},
	} {
		t.Run(tc.choice+" after "+tc.first, func(t *testing.T) {
			e := newEnv(t, nil)
			e.sim.SetFaults(sim.Faults{SharedIDLookup: tc.choice})
			writes := []func() resp{
				func() resp { return e.post(sim.PathAccrual, accrual(1, "S-1", 5000, 1)) },
				func() resp { return e.post(sim.PathRedemption, e.redemption(1, "S-1", 3, 10, "2026-11-22", nil)) },
			}
			if tc.first == "redemption" {
				writes[0], writes[1] = writes[1], writes[0]
			}
			var bits []string
			for _, w := range writes {
				bits = append(bits, successData(t, w(), "object").(map[string]any)["bitReference"].(string))
			}
			rec := successData(t, e.lookupByID("S-1"), "object").(map[string]any)
			if rec["transactionType"] != tc.want {
				t.Fatalf("lookup by id found %v, want %s", rec["transactionType"], tc.want)
			}
			for _, bit := range bits {
				r := successData(t, e.post(sim.PathLookup, map[string]string{"loyaltyId": sim.MemberID(1), "bitReference": bit}), "object")
				if r.(map[string]any)["bitReference"] != bit {
					t.Fatalf("by bitReference %s: %v", bit, r)
				}
			}
		})
	}
}

// The new settings go through the admin API and its validation.
func TestBadPartnerAdmin(t *testing.T) {
	e := newEnv(t, nil)
	const tok = "admin-secret"
	body := `{"lateApplyRate":0.5,"lateApplyDelay":"2s","lookupLag":"1500ms","nullNumbersRate":0.25,"sharedIdLookup":"latest"}`
	if r := e.admin(http.MethodPut, "faults", tok, body); r.status != 200 {
		t.Fatalf("PUT faults: %s", r.raw)
	}
	want := sim.Faults{LateApplyRate: 0.5, LateApplyDelay: 2 * time.Second, LookupLag: 1500 * time.Millisecond,
		NullNumbersRate: 0.25, SharedIDLookup: sim.SharedIDLatest}
	got := e.sim.Faults()
	if b1, _ := json.Marshal(got); string(b1) != mustJSON(t, want) {
		t.Fatalf("faults %s, want %s", b1, mustJSON(t, want))
	}
	for name, bad := range map[string]string{
		"late rate above 1":  `{"lateApplyRate":1.5}`,
		"null rate negative": `{"nullNumbersRate":-0.1}`,
		"negative delay":     `{"lateApplyDelay":"-1s"}`,
		"negative lag":       `{"lookupLag":"-1s"}`,
		"unknown choice":     `{"sharedIdLookup":"oldest"}`,
	} {
		t.Run(name, func(t *testing.T) {
			r := e.admin(http.MethodPut, "faults", tok, bad)
			wantError(t, r, 400, sim.CodeInvalidRequest)
		})
	}
	if r := e.admin(http.MethodGet, "late-applies/flush", tok, ""); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET flush: %d", r.status)
	}
	if !strings.Contains(mustJSON(t, e.sim.Faults()), `"lookupLag":"1.5s"`) {
		t.Fatal("an invalid PUT changed the faults")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
