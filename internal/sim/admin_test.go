package sim_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

func (e *env) admin(method, path, token, body string) resp {
	e.t.Helper()
	var req *http.Request
	if body == "" {
		req, _ = http.NewRequest(method, e.srv.URL+"/__sim/"+path, nil)
	} else {
		req, _ = http.NewRequest(method, e.srv.URL+"/__sim/"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set(sim.AdminHeader, token)
	}
	return e.send(req)
}

func TestAdminAPIAuth(t *testing.T) {
	off := newEnv(t, func(o *sim.Options) { o.AdminToken = "" })
	for _, path := range []string{"faults", "counters", "ledger", "revoke-tokens"} {
		if r := off.admin(http.MethodGet, path, "anything", ""); r.status != 404 {
			t.Fatalf("admin off: %s answered %d", path, r.status)
		}
	}
	e := newEnv(t, nil)
	for name, tok := range map[string]string{"missing": "", "wrong": "admin-secreT", "prefix": "admin"} {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct{ method, path, body string }{
				{http.MethodGet, "faults", ""}, {http.MethodPut, "faults", `{"dropRate":1}`}, {http.MethodPost, "revoke-tokens", ""},
				{http.MethodPut, "token-ttl", `{"accessTokenTTL":"1s"}`}, {http.MethodGet, "counters", ""}, {http.MethodGet, "ledger", ""},
				{http.MethodPost, "credentials", `{"password":"p2"}`},
			} {
				wantError(t, e.admin(tc.method, tc.path, tok, tc.body), 401, sim.CodeUnauthorized)
			}
		})
	}
	if e.sim.Faults().DropRate != 0 {
		t.Fatal("unauthenticated PUT applied")
	}
}

func TestAdminAPI(t *testing.T) {
	e := newEnv(t, nil)
	const tok = "admin-secret"
	access := e.bearer()

	r := e.admin(http.MethodPut, "faults", tok, `{"errorRates":{"503":1},"retryAfter":"3s","endpoints":["point-accrual"]}`)
	if r.status != 200 || r.body["retryAfter"] != "3s" {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	if f := e.sim.Faults(); f.ErrorRates[503] != 1 || f.RetryAfter != 3*time.Second {
		t.Fatalf("%+v", f)
	}
	if r := e.post(sim.PathAccrual, accrual(1, "T-1", 1, 0)); r.status != 503 || r.header.Get("Retry-After") != "3" {
		t.Fatalf("%d", r.status)
	}
	if r := e.admin(http.MethodGet, "faults", tok, ""); r.status != 200 || r.body["errorRates"].(map[string]any)["503"] != 1.0 {
		t.Fatalf("%s", r.raw)
	}
	for _, bad := range []string{`{"dropRate":3}`, `{"nope":1}`, `{"latency":"x"}`, `[`} {
		wantError(t, e.admin(http.MethodPut, "faults", tok, bad), 400, sim.CodeInvalidRequest)
	}
	if r := e.admin(http.MethodPut, "faults", tok, `{}`); r.status != 200 || len(r.body) != 0 {
		t.Fatalf("clear: %s", r.raw)
	}
	successData(t, e.post(sim.PathAccrual, accrual(1, "T-1", 5000, 0)), "object")

	r = e.admin(http.MethodGet, "counters", tok, "")
	calls := r.body["calls"].(map[string]any)[sim.EndpointAccrual].(map[string]any)
	if r.body["tokensIssued"] != 1.0 || calls["503"] != 1.0 || calls["200"] != 1.0 || r.body["totals"].(map[string]any)[sim.EndpointAccrual] != 2.0 {
		t.Fatalf("counters %s", r.raw)
	}
	if r := e.admin(http.MethodGet, "ledger", tok, ""); r.body["T-1"] != 1.0 || len(r.body) != 1 {
		t.Fatalf("ledger %s", r.raw)
	}
	if r := e.admin(http.MethodGet, "members/"+sim.MemberID(1), tok, ""); r.body["balance"] != 10_005.0 || r.body["linked"] != false {
		t.Fatalf("member %s", r.raw)
	}
	wantError(t, e.admin(http.MethodGet, "members/LB99999999", tok, ""), 400, sim.CodeMemberNotFound)

	if r := e.admin(http.MethodPut, "token-ttl", tok, `{"accessTokenTTL":"45s"}`); r.status != 200 ||
		r.body["accessTokenTTL"] != "45s" || r.body["refreshTokenTTL"] != "30m0s" {
		t.Fatalf("ttl %s", r.raw)
	}
	wantError(t, e.admin(http.MethodPut, "token-ttl", tok, `{"accessTokenTTL":"5ms"}`), 400, sim.CodeInvalidRequest)
	if e.login().body["expires_in"] != 45.0 {
		t.Fatal("ttl not applied")
	}

	if r := e.admin(http.MethodPost, "revoke-tokens", tok, ""); r.status != 200 {
		t.Fatalf("revoke %d", r.status)
	}
	wantError(t, e.call(http.MethodGet, sim.PathCustomerInfo+sim.MemberID(1), nil, access), 401, sim.CodeUnauthorized)

	if r := e.admin(http.MethodGet, "revoke-tokens", tok, ""); r.status != 405 {
		t.Fatalf("GET revoke: %d", r.status)
	}
	if r := e.admin(http.MethodGet, "nothing", tok, ""); r.status != 404 {
		t.Fatalf("unknown admin path: %d", r.status)
	}
	// Admin calls are neither faulted nor counted.
	e.sim.SetFaults(sim.Faults{DropRate: 1})
	if r := e.admin(http.MethodGet, "faults", tok, ""); r.status != 200 {
		t.Fatal("admin API faulted")
	}
}
