package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type started struct {
	base           string
	stdout, stderr *testkit.SyncBuffer
	stop           func() int
}

// start runs the command until stop is called; it fails the test if the
// command does not come up.
func start(t *testing.T, envs map[string]string, args ...string) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{stdout: &testkit.SyncBuffer{}, stderr: &testkit.SyncBuffer{}}
	ready := make(chan string, 1)
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, env{stdout: s.stdout, stderr: s.stderr, ready: func(a string) { ready <- a },
			lookup: func(k string) (string, bool) { v, ok := envs[k]; return v, ok }},
			append([]string{"--addr", "127.0.0.1:0"}, args...))
	}()
	select {
	case a := <-ready:
		s.base = "http://" + a
	case code := <-done:
		cancel()
		t.Fatalf("exited %d: %s", code, s.stderr)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("not listening after 10s")
	}
	var once sync.Once
	code := 0
	s.stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("no shutdown within 10s")
			}
		})
		return code
	}
	t.Cleanup(func() { s.stop() })
	return s
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func publicPEM(t *testing.T, k *ecdsa.PrivateKey) string {
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func post(t *testing.T, c *http.Client, target, ctype, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

func TestServeFromFlagsAndEnvironment(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keyFile := writeFile(t, "partner.pem", publicPEM(t, key))
	secretFile := writeFile(t, "secret", "file-secret\n")
	s := start(t, map[string]string{
		"LOYALTY_SIM_CLIENT_SECRET_FILE": secretFile,
		"LOYALTY_SIM_ADMIN_TOKEN":        "adm",
		"LOYALTY_SIM_MEMBERS":            "5",
	}, "--partner-public-key", keyFile+"#k1", "--error-rate", "503=0", "--duplicate-policy", "return-original",
		"--clock-skew", "45s", "--max-sign-lifetime", "3m", "--replay-cache-size", "500")
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()

	form := url.Values{"grant_type": {"password"}, "client_id": {sim.DefaultClientID}, "client_secret": {"file-secret"},
		"username": {sim.DefaultUsername}, "password": {sim.DefaultPassword}}
	if status, m := post(t, c, s.base+sim.PathToken, "application/x-www-form-urlencoded", form.Encode(), nil); status != 200 || m["access_token"] == nil {
		t.Fatalf("password grant with the file's secret: %d", status)
	}
	form.Set("client_secret", sim.DefaultClientSecret)
	if status, _ := post(t, c, s.base+sim.PathToken, "application/x-www-form-urlencoded", form.Encode(), nil); status != 401 {
		t.Fatalf("demo secret still accepted: %d", status)
	}
	// iat 40s ahead: within --clock-skew 45s, beyond the default 30s.
	now := time.Now().Add(40 * time.Second)
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": sim.DefaultClientID, "aud": signing.PartnerTokenAudience,
		"typ": signing.PartnerTokenType, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": "j1"})
	tok.Header["kid"] = "k1"
	signed, _ := tok.SignedString(key)
	if status, m := post(t, c, s.base+sim.PathExchangeToken, "application/json", `{"token":"`+signed+`"}`, nil); status != 200 || m["token_type"] != "Bearer" {
		t.Fatalf("exchange with the key file: %d %v", status, m)
	}
	if status, _ := post(t, c, s.base+sim.PathExchangeToken, "application/json", `{"token":"`+signed+`"}`, nil); status != 401 {
		t.Fatalf("replayed partner token: %d", status)
	}
	req, _ := http.NewRequest(http.MethodGet, s.base+"/__sim/faults", nil)
	req.Header.Set(sim.AdminHeader, "adm")
	res, err := c.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("admin: %v %v", err, res)
	}
	res.Body.Close()

	out := s.stdout.String()
	for _, want := range []string{s.base, sim.DefaultClientID, "(set, not shown)", sim.DefaultPassword, "LB00000005", "1 registered", "return-original", "on: ",
		"clock skew 45s, sign lifetime at most 3m0s, each jti once (500 remembered at most)"} {
		if !strings.Contains(out, want) {
			t.Errorf("banner lacks %q:\n%s", want, out)
		}
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, secret := range []string{"file-secret", "adm\n", signed} {
		if strings.Contains(out+s.stderr.String(), secret) {
			t.Fatalf("printed a secret %q", secret)
		}
	}
}

// SIGINT/SIGTERM (the context) ends a hung request and shuts down.
func TestShutdownEndsHungRequests(t *testing.T) {
	s := start(t, nil, "--hang-rate", "1", "--fault-endpoints", "token", "--admin-token", "adm")
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	errc := make(chan error, 1)
	go func() {
		res, err := c.PostForm(s.base+sim.PathToken, url.Values{"grant_type": {"password"}})
		if err == nil {
			res.Body.Close()
		}
		errc <- err
	}()
	// Poll the admin counters until the token request is hanging.
	deadline := time.Now().Add(5 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, s.base+"/__sim/counters", nil)
		req.Header.Set(sim.AdminHeader, "adm")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var cs sim.Counters
		_ = json.NewDecoder(res.Body).Decode(&cs)
		res.Body.Close()
		if cs.Totals[sim.EndpointToken] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("token request never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if err := <-errc; err == nil {
		t.Fatal("hung request answered")
	}
}

// --retry-after 0s answers injected 429/503 without Retry-After; the
// default sends one.
func TestRetryAfterFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"1"}},
		{[]string{"--retry-after", "2500ms"}, []string{"3"}},
		{[]string{"--retry-after", "0s"}, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			s := start(t, nil, append([]string{"--error-rate", "503=1", "--fault-endpoints", "token"}, tc.args...)...)
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			res, err := c.PostForm(s.base+sim.PathToken, url.Values{"grant_type": {"password"}})
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if got := res.Header.Values("Retry-After"); res.StatusCode != 503 || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("%d Retry-After %q, want %q", res.StatusCode, got, tc.want)
			}
		})
	}
}

// The bad-partner flags become the faults in force, as the admin API
// shows them; left out, they are off.
func TestBadPartnerFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, `{"retryAfter":"1s","lateApplyDelay":"300ms","sharedIdLookup":"accrual"}`},
		{[]string{"--late-apply-rate", "0.2", "--late-apply-delay", "2s", "--lookup-lag", "1500ms", "--null-numbers-rate", "0.1",
			"--shared-id-lookup", "latest"},
			`{"retryAfter":"1s","lateApplyRate":0.2,"lateApplyDelay":"2s","lookupLag":"1.5s","nullNumbersRate":0.1,"sharedIdLookup":"latest"}`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			s := start(t, nil, append([]string{"--admin-token", "adm"}, tc.args...)...)
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodGet, s.base+"/__sim/faults", nil)
			req.Header.Set(sim.AdminHeader, "adm")
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			_, _ = got.ReadFrom(res.Body)
			res.Body.Close()
			if strings.TrimSpace(got.String()) != tc.want {
				t.Fatalf("faults %s, want %s", got.String(), tc.want)
			}
			if code := s.stop(); code != 0 {
				t.Fatalf("exit %d", code)
			}
		})
	}
}

// --capacity 1 with the one accrual hanging: a profile read is answered
// --over-capacity-status, without Retry-After under --retry-after 0s, and
// counted; the token endpoint is not limited.
func TestCapacityFlags(t *testing.T) {
	s := start(t, map[string]string{"LOYALTY_SIM_OVER_CAPACITY_STATUS": "429"}, "--capacity", "1", "--retry-after", "0s",
		"--hang-rate", "1", "--fault-endpoints", "point-accrual", "--admin-token", "adm")
	if out := s.stdout.String(); !strings.Contains(out, "capacity:      1 business requests at once, then 429") {
		t.Errorf("banner:\n%s", out)
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	form := url.Values{"grant_type": {"password"}, "client_id": {sim.DefaultClientID}, "client_secret": {sim.DefaultClientSecret},
		"username": {sim.DefaultUsername}, "password": {sim.DefaultPassword}}
	status, m := post(t, c, s.base+sim.PathToken, "application/x-www-form-urlencoded", form.Encode(), nil)
	if status != 200 {
		t.Fatalf("token: %d", status)
	}
	auth := "Bearer " + m["access_token"].(string)
	hung := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, s.base+sim.PathAccrual, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		res, err := c.Do(req)
		if err == nil {
			res.Body.Close()
		}
		hung <- err
	}()
	// Poll, with a deadline, until the hanging accrual holds the one place.
	deadline := time.Now().Add(5 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, s.base+sim.PathCustomerInfo+sim.MemberID(1), nil)
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", "application/json")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Errors struct{ Code string } `json:"errors"`
		}
		_ = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode == 429 {
			if _, sent := res.Header["Retry-After"]; sent || body.Errors.Code != sim.CodeOverCapacity {
				t.Fatalf("Retry-After %q, code %q", res.Header.Values("Retry-After"), body.Errors.Code)
			}
			break
		}
		if res.StatusCode != 200 || time.Now().After(deadline) {
			t.Fatalf("profile: %d (5s deadline)", res.StatusCode)
		}
		time.Sleep(time.Millisecond)
	}
	if status, _ := post(t, c, s.base+sim.PathToken, "application/x-www-form-urlencoded", form.Encode(), nil); status != 200 {
		t.Fatalf("token at capacity: %d", status)
	}
	req, _ := http.NewRequest(http.MethodGet, s.base+"/__sim/counters", nil)
	req.Header.Set(sim.AdminHeader, "adm")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var cs sim.Counters
	_ = json.NewDecoder(res.Body).Decode(&cs)
	res.Body.Close()
	if cs.OverCapacity[sim.EndpointCustomerInfo] != 1 || cs.Calls[sim.EndpointCustomerInfo][429] != 1 {
		t.Fatalf("counters %+v", cs)
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if err := <-hung; err == nil {
		t.Fatal("hung accrual answered")
	}
}

func TestUsageErrors(t *testing.T) {
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	privFile := writeFile(t, "private.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	junk := writeFile(t, "junk.pem", "not a key")
	for name, tc := range map[string]struct {
		args []string
		envs map[string]string
	}{
		"unknown flag":       {args: []string{"--nope"}},
		"positional":         {args: []string{"serve"}},
		"duplicate policy":   {args: []string{"--duplicate-policy", "ignore"}},
		"error rate syntax":  {args: []string{"--error-rate", "503"}},
		"error rates over 1": {args: []string{"--error-rate", "500=0.7,503=0.7"}},
		"drop rate":          {args: []string{"--drop-rate", "2"}},
		"unknown endpoint":   {args: []string{"--fault-endpoints", "accrual"}},
		"private key given":  {args: []string{"--partner-public-key", privFile}},
		"not PEM":            {args: []string{"--partner-public-key", junk}},
		"missing key file":   {args: []string{"--partner-public-key", "/nonexistent.pem"}},
		"members":            {args: []string{"--members", "-3"}},
		"clock skew":         {args: []string{"--clock-skew", "10m"}},
		"sign lifetime":      {args: []string{"--max-sign-lifetime", "-1m"}},
		"replay cache size":  {args: []string{"--replay-cache-size", "-1"}},
		"retry after":        {args: []string{"--retry-after", "-1s"}},
		"capacity":           {args: []string{"--capacity", "-1"}},
		"late apply rate":    {args: []string{"--late-apply-rate", "1.1"}},
		"late apply delay":   {args: []string{"--late-apply-delay", "-1s"}},
		"lookup lag":         {args: []string{"--lookup-lag", "-1s"}},
		"null numbers rate":  {args: []string{"--null-numbers-rate", "-0.5"}},
		"shared id lookup":   {args: []string{"--shared-id-lookup", "oldest"}},
		"over-capacity":      {args: []string{"--over-capacity-status", "500"}},
		"bad env value":      {envs: map[string]string{"LOYALTY_SIM_EARN_RATE": "lots"}},
		"log level":          {args: []string{"--log-level", "loud"}},
		"profile":            {args: []string{"--partner-accrual-type", "X", "--partner-redemption-type", "X"}},
		"profile file":       {args: []string{"--profile", "/nonexistent.yaml"}},
		"profile env":        {envs: map[string]string{"LOYALTY_SIM_PARTNER_FRACTIONAL_POINTS": "floor"}},
		"keyed by id alone":  {args: []string{"--partner-transaction-key", "id"}},
		"transaction key":    {args: []string{"--partner-transaction-key", "type"}},
	} {
		t.Run(name, func(t *testing.T) {
			// Cancelled: a setting wrongly accepted starts and stops at
			// once (exit 0) instead of serving until the test times out.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var out, errb testkit.SyncBuffer
			code := run(ctx, env{stdout: &out, stderr: &errb,
				lookup: func(k string) (string, bool) { v, ok := tc.envs[k]; return v, ok }}, append([]string{"--addr", "127.0.0.1:0"}, tc.args...))
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), "loyalty-sim: ") {
				t.Fatalf("no message: %s", errb.String())
			}
		})
	}
	var out, errb testkit.SyncBuffer
	if code := run(context.Background(), env{stdout: &out, stderr: &errb, lookup: func(string) (string, bool) { return "", false }},
		[]string{"-h"}); code != exitOK || !strings.Contains(errb.String(), "LOYALTY_SIM_CLIENT_SECRET_FILE") {
		t.Fatalf("help: %d %s", code, errb.String())
	}
}

// --profile FILE (the bridge's --partner-* keys) and LOYALTY_SIM_PARTNER_*
// make the simulator answer with another partner's codes, types and
// statuses.
func TestProfile(t *testing.T) {
	file := writeFile(t, "partner.yaml", `partner-not-found-codes: [TXN_NOT_FOUND]
partner-member-not-found-codes: [NO_SUCH_MEMBER, UNKNOWN_MEMBER]
partner-duplicate-codes: TXN_DUPLICATE
partner-accrual-type: EARN
partner-redemption-type: BURN
partner-applied-statuses: COMPLETED
`)
	s := start(t, map[string]string{"LOYALTY_SIM_PARTNER_ACCRUAL_TYPE": "POINTS_EARNED"}, "--profile", file)
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	form := url.Values{"grant_type": {"password"}, "client_id": {sim.DefaultClientID}, "client_secret": {sim.DefaultClientSecret},
		"username": {sim.DefaultUsername}, "password": {sim.DefaultPassword}}
	status, m := post(t, c, s.base+sim.PathToken, "application/x-www-form-urlencoded", form.Encode(), nil)
	if status != 200 {
		t.Fatalf("token: %d", status)
	}
	auth := map[string]string{"Authorization": "Bearer " + m["access_token"].(string)}
	lookup := `{"loyaltyId":"` + sim.MemberID(1) + `","transactionId":"T-1"}`
	if status, m := post(t, c, s.base+sim.PathLookup, "application/json", lookup, auth); status != 400 || m["errors"].(map[string]any)["code"] != "TXN_NOT_FOUND" {
		t.Fatalf("lookup of nothing: %d %v", status, m)
	}
	unknown := `{"loyaltyId":"LB99999999","transactionId":"T-1"}`
	if status, m := post(t, c, s.base+sim.PathLookup, "application/json", unknown, auth); status != 400 || m["errors"].(map[string]any)["code"] != "NO_SUCH_MEMBER" {
		t.Fatalf("lookup for an unknown member: %d %v", status, m)
	}
	accrual := `{"loyaltyId":"` + sim.MemberID(1) + `","transactionId":"T-1","transactionDate":1700000000000,"transactionAmount":5000}`
	for i, want := range []int{200, 400} {
		if status, m := post(t, c, s.base+sim.PathAccrual, "application/json", accrual, auth); status != want {
			t.Fatalf("accrual %d: %d %v", i, status, m)
		} else if want == 400 && m["errors"].(map[string]any)["code"] != "TXN_DUPLICATE" {
			t.Fatalf("duplicate: %v", m)
		}
	}
	status, m = post(t, c, s.base+sim.PathLookup, "application/json", lookup, auth)
	data, _ := m["data"].(map[string]any)
	if status != 200 || data["transactionType"] != "POINTS_EARNED" || data["status"] != "COMPLETED" {
		t.Fatalf("lookup: %d %v", status, m)
	}
	if out := s.stdout.String(); !strings.Contains(out, "not found TXN_NOT_FOUND, member not found NO_SUCH_MEMBER, duplicate TXN_DUPLICATE, types POINTS_EARNED/BURN, status COMPLETED") {
		t.Errorf("banner:\n%s", out)
	}
}

// A secret given as a flag is readable by every user of the machine in
// /proc/<pid>/cmdline: the simulator says so, naming the flag and never
// the value, as the bridge does.
func TestSecretFlagWarned(t *testing.T) {
	const canary = "sim-secret-canary"
	c, err := parse(env{lookup: func(string) (string, bool) { return "", false }}, []string{"--client-secret", canary})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(c.warnings, "\n")
	if !strings.Contains(all, "--client-secret") || strings.Contains(all, canary) {
		t.Fatalf("warnings %q", c.warnings)
	}
}
