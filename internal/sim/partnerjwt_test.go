package sim_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// signer is the bridge's signer with the EC partner key (registered
// without a kid) on the env's clock.
func (e *env) signer() *signing.Signer {
	e.t.Helper()
	s, err := signing.New(ecPartner(), signing.Options{Issuer: sim.DefaultClientID, Now: e.clk.Now})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// signedBy is a redemption of 1 point for 1 with date "d", signed by s.
func (e *env) signedBy(s *signing.Signer, member int, tx string) map[string]any {
	e.t.Helper()
	b := e.redemption(member, tx, 1, 1, "d", nil)
	sign, err := s.RedemptionSign(signing.Redemption{LoyaltyID: sim.MemberID(member), TransactionID: tx, UsedPoint: 1,
		TransactionAmount: 1, TransactionDate: "d"})
	if err != nil {
		e.t.Fatal(err)
	}
	b["sign"] = sign
	return b
}

// exchangeBody is an exchange-token body for a partner token with claims c.
func (e *env) exchangeBody(c claims) map[string]string {
	return map[string]string{"token": signJWT(e.t, ecPartner(), "", c)}
}

// postJWT posts body to exchange-token (without a bearer token, as the
// spec has it) or to another path (with the env's).
func (e *env) postJWT(path string, body any) resp {
	e.t.Helper()
	if path == sim.PathExchangeToken {
		return e.call(http.MethodPost, path, body, "-")
	}
	return e.post(path, body)
}

// wantRefused asserts the answer a refused partner JWT gets on path: 401
// UNAUTHORIZED at exchange-token, 400 INVALID_SIGN at redemption, with a
// message mentioning why.
func wantRefused(t testing.TB, path string, r resp, why string) {
	t.Helper()
	if path == sim.PathExchangeToken {
		wantError(t, r, http.StatusUnauthorized, sim.CodeUnauthorized)
	} else {
		wantError(t, r, http.StatusBadRequest, sim.CodeInvalidSign)
	}
	if msg := r.body["errors"].(map[string]any)["message"].(string); !strings.Contains(msg, why) {
		t.Fatalf("message %q does not say %q", msg, why)
	}
}

// wantAccepted asserts a 200 from exchange-token or redemption.
func wantAccepted(t testing.TB, path string, r resp) {
	t.Helper()
	if path == sim.PathExchangeToken {
		if r.status != http.StatusOK || r.body["access_token"] == nil {
			t.Fatalf("exchange: %d %s", r.status, r.raw)
		}
		return
	}
	successData(t, r, "object")
}

// A sign is not a partner token and a partner token is not a sign, even
// when one carries every claim of the other: aud and typ decide.
func TestPartnerJWTKinds(t *testing.T) {
	e := newEnv(t, nil)
	signer := e.signer()
	asToken := func(c claims) { c["aud"], c["typ"] = signing.PartnerTokenAudience, signing.PartnerTokenType }
	asSign := func(c claims) { c["aud"], c["typ"] = signing.RedemptionSignAudience, signing.RedemptionSignType }
	token := func(mod func(claims)) func(string) any {
		return func(string) any { c := e.partnerClaims(); mod(c); return e.exchangeBody(c) }
	}
	sign := func(mod func(claims)) func(string) any {
		return func(tx string) any { return e.redemption(1, tx, 1, 1, "d", mod) }
	}
	cases := []struct {
		name string
		path string
		body func(tx string) any
		why  string // "" when accepted, else what the refusal names
	}{
		{"partner token", sim.PathExchangeToken, token(func(claims) {}), ""},
		{"partner token by the signer", sim.PathExchangeToken, func(string) any {
			pt, err := signer.PartnerToken()
			if err != nil {
				t.Fatal(err)
			}
			return map[string]string{"token": pt}
		}, ""},
		{"sign used as partner token", sim.PathExchangeToken, func(tx string) any {
			return map[string]any{"token": e.redemption(1, tx, 1, 1, "d", nil)["sign"]}
		}, "aud"},
		{"signer's sign used as partner token", sim.PathExchangeToken, func(tx string) any {
			return map[string]any{"token": e.signedBy(signer, 1, tx)["sign"]}
		}, "aud"},
		{"partner token typed as a sign", sim.PathExchangeToken, token(func(c claims) { c["typ"] = signing.RedemptionSignType }), "typ"},
		{"partner token for the sign's aud", sim.PathExchangeToken, token(func(c claims) { c["aud"] = signing.RedemptionSignAudience }), "aud"},
		{"partner token without aud", sim.PathExchangeToken, token(func(c claims) { delete(c, "aud") }), "aud"},
		{"partner token without typ", sim.PathExchangeToken, token(func(c claims) { delete(c, "typ") }), "typ"},
		{"partner token for its aud among others", sim.PathExchangeToken,
			token(func(c claims) { c["aud"] = []string{"someone-else", signing.PartnerTokenAudience} }), ""},

		{"sign", sim.PathRedemption, sign(nil), ""},
		{"sign by the signer", sim.PathRedemption, func(tx string) any { return e.signedBy(signer, 1, tx) }, ""},
		{"partner token with every sign claim used as sign", sim.PathRedemption, sign(asToken), "aud"},
		{"signer's partner token used as sign", sim.PathRedemption, func(tx string) any {
			b := e.redemption(1, tx, 1, 1, "d", nil)
			pt, err := signer.PartnerToken()
			if err != nil {
				t.Fatal(err)
			}
			b["sign"] = pt
			return b
		}, "aud"},
		{"sign typed as a partner token", sim.PathRedemption, sign(func(c claims) { asSign(c); c["typ"] = signing.PartnerTokenType }), "typ"},
		{"sign for the partner token's aud", sim.PathRedemption, sign(func(c claims) { c["aud"] = signing.PartnerTokenAudience }), "aud"},
		{"sign without aud", sim.PathRedemption, sign(func(c claims) { delete(c, "aud") }), "aud"},
		{"sign without typ", sim.PathRedemption, sign(func(c claims) { delete(c, "typ") }), "typ"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tx := "K-" + string(rune('a'+i))
			r := e.postJWT(tc.path, tc.body(tx))
			if tc.why == "" {
				wantAccepted(t, tc.path, r)
				return
			}
			wantRefused(t, tc.path, r, tc.why)
			if tc.path == sim.PathRedemption && e.sim.Effects(tx) != 0 {
				t.Fatalf("%s applied", tx)
			}
		})
	}
}
