package sim_test

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

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

// replayed is what the refusal of a used jti says.
const replayed = "jti already used"

// step is one call of a scenario: want "" is success, else the refusal's
// reason (see wantRefused) or, for business refusals, code: CODE.
type step struct {
	path string
	body any
	want string
}

func runSteps(t *testing.T, e *env, steps []step) {
	t.Helper()
	for i, st := range steps {
		r := e.postJWT(st.path, st.body)
		switch code, business := strings.CutPrefix(st.want, "code: "); {
		case st.want == "":
			wantAccepted(t, st.path, r)
		case business:
			wantError(t, r, http.StatusBadRequest, code)
		default:
			wantRefused(t, st.path, r, st.want)
		}
		if t.Failed() {
			t.Fatalf("step %d", i+1)
		}
	}
}

// Each partner JWT is accepted once, whatever became of the call that used
// it: a second use of its jti is refused, under either duplicate policy.
func TestPartnerJWTReplay(t *testing.T) {
	cases := []struct {
		name  string
		opts  func(*sim.Options)
		steps func(e *env) []step
	}{
		{"partner token sent twice", nil, func(e *env) []step {
			b := e.exchangeBody(e.partnerClaims())
			return []step{{sim.PathExchangeToken, b, ""}, {sim.PathExchangeToken, b, replayed}, {sim.PathExchangeToken, b, replayed}}
		}},
		{"signer's partner token sent twice", nil, func(e *env) []step {
			pt, err := e.signer().PartnerToken()
			if err != nil {
				t.Fatal(err)
			}
			b := map[string]string{"token": pt}
			return []step{{sim.PathExchangeToken, b, ""}, {sim.PathExchangeToken, b, replayed}}
		}},
		{"another partner token with a used jti", nil, func(e *env) []step {
			c := e.partnerClaims()
			first := e.exchangeBody(c)
			c["exp"] = c["exp"].(int64) + 1
			return []step{{sim.PathExchangeToken, first, ""}, {sim.PathExchangeToken, e.exchangeBody(c), replayed}}
		}},
		{"sign sent twice", nil, func(e *env) []step {
			b := e.redemption(1, "P-1", 1, 1, "d", nil)
			return []step{{sim.PathRedemption, b, ""}, {sim.PathRedemption, b, replayed}}
		}},
		{"signer's sign sent twice, duplicates answered with the original", func(o *sim.Options) { o.DuplicatePolicy = sim.DuplicateReturnOriginal },
			func(e *env) []step {
				b := e.signedBy(e.signer(), 1, "P-1")
				return []step{{sim.PathRedemption, b, ""}, {sim.PathRedemption, b, replayed},
					// A new sign gets the original answer.
					{sim.PathRedemption, e.signedBy(e.signer(), 1, "P-1"), ""}}
			}},
		{"sign of a refused redemption sent again", nil, func(e *env) []step {
			b := e.redemption(1, "P-big", 1_000_000, 1, "d", nil)
			return []step{{sim.PathRedemption, b, "code: " + sim.CodeInsufficientPoint}, {sim.PathRedemption, b, replayed}}
		}},
		{"sign refused for its claims does not use its jti up", nil, func(e *env) []step {
			good := e.redemption(1, "P-1", 1, 1, "d", nil)
			tampered := maps.Clone(good)
			tampered["usedPoint"] = 2
			return []step{{sim.PathRedemption, tampered, "usedPoint"}, {sim.PathRedemption, good, ""}}
		}},
		{"one jti in a partner token and a sign", nil, func(e *env) []step {
			c := e.partnerClaims()
			jti := c["jti"]
			return []step{{sim.PathExchangeToken, e.exchangeBody(c), ""},
				{sim.PathRedemption, e.redemption(1, "P-1", 1, 1, "d", func(c claims) { c["jti"] = jti }), ""}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts)
			runSteps(t, e, tc.steps(e))
			if n := e.sim.Effects("P-1"); n > 1 {
				t.Fatalf("P-1 applied %d times", n)
			}
		})
	}
}

// The replay cache is bounded: when it is full of unexpired jtis new
// partner JWTs are refused (never a jti forgotten early), and a jti is
// forgotten once its JWT has expired.
func TestReplayCacheBounded(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	e := newEnv(t, func(o *sim.Options) { o.ReplayCacheSize = 2; o.Logger = zap.New(core) })
	first := e.exchangeBody(e.partnerClaims())
	runSteps(t, e, []step{
		{sim.PathExchangeToken, first, ""},
		{sim.PathRedemption, e.redemption(1, "B-1", 1, 1, "d", nil), ""},
		{sim.PathExchangeToken, e.exchangeBody(e.partnerClaims()), "replay cache full"},
		{sim.PathRedemption, e.redemption(1, "B-2", 1, 1, "d", nil), "replay cache full"},
		{sim.PathExchangeToken, first, replayed},
	})
	// Both remembered JWTs expire, skew allowance included.
	e.clk.Advance(2*time.Minute + sim.DefaultClockSkew)
	runSteps(t, e, []step{
		{sim.PathExchangeToken, first, "expired"},
		{sim.PathExchangeToken, e.exchangeBody(e.partnerClaims()), ""},
		{sim.PathRedemption, e.redemption(1, "B-2", 1, 1, "d", nil), ""},
		{sim.PathRedemption, e.redemption(1, "B-3", 1, 1, "d", nil), "replay cache full"},
	})
	// Becoming full and having room again are logged once each time.
	full, room := logs.FilterMessageSnippet("replay cache full").Len(), logs.FilterMessageSnippet("room again").Len()
	if full != 2 || room != 1 {
		t.Fatalf("logged full %d times, room again %d times", full, room)
	}
}

// Partner JWTs allow for clock skew (Options.ClockSkew, default 30 s): iat
// that far ahead, exp that far behind, and a partner token's exp that much
// beyond 5 minutes ahead are accepted; beyond the allowance they are not.
func TestPartnerJWTClockSkew(t *testing.T) {
	const both, tokenOnly = 0, 1
	cases := []struct {
		name     string
		skew     time.Duration // 0: default
		iat, exp time.Duration // from now; exp 0 is iat + 2 minutes
		kinds    int
		why      string // "" when accepted
	}{
		{"iat now", 0, 0, 0, both, ""},
		{"iat 2s ahead", 0, 2 * time.Second, 0, both, ""},
		{"iat 20s ahead", 0, 20 * time.Second, 0, both, ""},
		{"iat 30s ahead, the allowance", 0, sim.DefaultClockSkew, 0, both, ""},
		{"iat 31s ahead", 0, sim.DefaultClockSkew + time.Second, 0, both, "iat is in the future"},
		{"iat a minute ahead", 0, time.Minute, 0, both, "iat is in the future"},
		{"exp 10s ago", 0, -2 * time.Minute, -10 * time.Second, both, ""},
		{"exp 30s ago", 0, -2 * time.Minute, -sim.DefaultClockSkew, both, "expired"},
		{"exp before iat", 0, 10 * time.Second, 5 * time.Second, both, "exp is not after iat"},
		{"partner token exp 5m20s ahead", 0, 0, 5*time.Minute + 20*time.Second, tokenOnly, ""},
		{"partner token exp 5m31s ahead", 0, 0, 5*time.Minute + 31*time.Second, tokenOnly, "ahead"},
		{"skew 60s: iat 45s ahead", time.Minute, 45 * time.Second, 0, both, ""},
		{"skew 60s: iat 61s ahead", time.Minute, 61 * time.Second, 0, both, "iat is in the future"},
		{"skew 60s: exp 50s ago", time.Minute, -2 * time.Minute, -50 * time.Second, both, ""},
		{"skew 5s: iat 20s ahead", 5 * time.Second, 20 * time.Second, 0, both, "iat is in the future"},
	}
	envs := map[time.Duration]*env{}
	envFor := func(skew time.Duration) *env {
		if envs[skew] == nil {
			envs[skew] = newEnv(t, func(o *sim.Options) { o.ClockSkew = skew })
		}
		return envs[skew]
	}
	for i, tc := range cases {
		e := envFor(tc.skew)
		times := func(c claims) {
			now := e.clk.Now()
			exp := tc.exp
			if exp == 0 {
				exp = tc.iat + 2*time.Minute
			}
			c["iat"], c["exp"] = now.Add(tc.iat).Unix(), now.Add(exp).Unix()
		}
		t.Run(tc.name+"/partner token", func(t *testing.T) {
			c := e.partnerClaims()
			times(c)
			runSteps(t, e, []step{{sim.PathExchangeToken, e.exchangeBody(c), tc.why}})
		})
		if tc.kinds == tokenOnly {
			continue
		}
		t.Run(tc.name+"/sign", func(t *testing.T) {
			runSteps(t, e, []step{{sim.PathRedemption, e.redemption(1, fmt.Sprint("S-", i), 1, 1, "d", times), tc.why}})
		})
	}
}

// A sign's lifetime, exp - iat, is capped (Options.MaxSignLifetime, default
// 5 minutes): a sign valid for ten years is refused. The bridge's signer
// stays within the default cap.
func TestSignLifetime(t *testing.T) {
	cases := []struct {
		name     string
		max      time.Duration // 0: default
		iat, exp time.Duration // from now
		why      string        // "" when accepted
	}{
		{"two minutes", 0, 0, 2 * time.Minute, ""},
		{"five minutes, the cap", 0, 0, sim.DefaultMaxSignLifetime, ""},
		{"five minutes and a second", 0, 0, sim.DefaultMaxSignLifetime + time.Second, "lifetime"},
		{"ten years", 0, 0, 10 * 365 * 24 * time.Hour, "lifetime"},
		{"ten years, issued an hour ago", 0, -time.Hour, 10 * 365 * 24 * time.Hour, "lifetime"},
		{"five minutes, issued 20s ahead (skew)", 0, 20 * time.Second, 20*time.Second + sim.DefaultMaxSignLifetime, ""},
		{"cap 1m: one minute", time.Minute, 0, time.Minute, ""},
		{"cap 1m: two minutes", time.Minute, 0, 2 * time.Minute, "lifetime"},
	}
	envs := map[time.Duration]*env{}
	for i, tc := range cases {
		if envs[tc.max] == nil {
			envs[tc.max] = newEnv(t, func(o *sim.Options) { o.MaxSignLifetime = tc.max })
		}
		e := envs[tc.max]
		t.Run(tc.name, func(t *testing.T) {
			times := func(c claims) {
				now := e.clk.Now()
				c["iat"], c["exp"] = now.Add(tc.iat).Unix(), now.Add(tc.exp).Unix()
			}
			runSteps(t, e, []step{{sim.PathRedemption, e.redemption(1, fmt.Sprint("L-", i), 1, 1, "d", times), tc.why}})
		})
	}
	t.Run("signer at its longest TTL", func(t *testing.T) {
		e := envs[0]
		s, err := signing.New(ecPartner(), signing.Options{Issuer: sim.DefaultClientID, Now: e.clk.Now, SignTTL: signing.MaxSignTTL})
		if err != nil {
			t.Fatal(err)
		}
		runSteps(t, e, []step{{sim.PathRedemption, e.signedBy(s, 1, "L-signer"), ""}})
	})
}
