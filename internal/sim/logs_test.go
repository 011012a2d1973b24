package sim_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// Every log line, debug included, of a run through grants, business calls,
// onboarding, faults and admin changes is free of credentials, tokens,
// signs and personal data.
func TestLogsCarryNoSecretsOrPII(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	e := newEnv(t, func(o *sim.Options) { o.Logger = zap.New(core) })
	login := e.login()
	refresh := login.body["refresh_token"].(string)
	e.form(sim.PathToken, url.Values{"grant_type": {"refresh_token"}, "client_id": {sim.DefaultClientID},
		"client_secret": {sim.DefaultClientSecret}, "refresh_token": {refresh}})
	e.form(sim.PathToken, url.Values{"grant_type": {"password"}, "client_id": {sim.DefaultClientID},
		"client_secret": {"wrong-secret"}, "username": {sim.DefaultUsername}, "password": {"wrong-password"}})
	body := onboardBody("P-log")
	successData(t, e.post(sim.PathOnboard, body), "object")
	red := e.redemption(1, "R-log", 1, 1, "d", nil)
	successData(t, e.post(sim.PathRedemption, red), "object")
	successData(t, e.post(sim.PathAccrual, accrual(1, "T-log", 1, 0)), "object")
	successData(t, e.post(sim.PathLink, map[string]string{"loyaltyId": sim.MemberID(1), "partnerMemberId": "P-secret-id"}), "object")
	profile := successData(t, e.get(sim.PathCustomerInfo+sim.MemberID(1)), "object").(map[string]any)
	e.sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}})
	e.get(sim.PathCustomerInfo + sim.MemberID(1))
	e.sim.SetFaults(sim.Faults{})
	e.sim.RevokeTokens()
	e.call(http.MethodGet, sim.PathCustomerInfo+sim.MemberID(1), nil, login.body["access_token"].(string))
	e.admin(http.MethodPost, "credentials", "admin-secret", `{"clientSecret":"rotated-secret","password":"rotated-password","revokeTokens":true}`)
	e.sim.RotateCredentials(sim.CredentialRotation{Password: "rotated-again"})

	secrets := []string{sim.DefaultClientSecret, sim.DefaultPassword, "wrong-secret", "wrong-password", "admin-secret",
		"rotated-secret", "rotated-password", "rotated-again",
		login.body["access_token"].(string), refresh, red["sign"].(string), "eyJ",
		body["phone"].(string), "+84901234567", body["fullName"].(string), body["email"].(string), body["idNumber"].(string),
		body["address"].(string), profile["phone"].(string), profile["email"].(string), profile["fullName"].(string)}
	if logs.Len() < 10 {
		t.Fatalf("only %d log lines", logs.Len())
	}
	for _, entry := range logs.All() {
		line := entry.Message + " " + fmt.Sprint(entry.ContextMap())
		for _, s := range secrets {
			if strings.Contains(line, s) {
				t.Fatalf("log line %q carries %q", line, s)
			}
		}
	}
}
