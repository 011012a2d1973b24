package apicall

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// conn builds the client stack the api command builds, against the
// simulator over HTTP, with password as the user's password.
func conn(t *testing.T, s *testkit.Sim, password string) Conn {
	t.Helper()
	envs := map[string]string{
		"LOYALTY_BRIDGE_API_BASE_URL":      s.URL,
		"LOYALTY_BRIDGE_API_CLIENT_ID":     sim.DefaultClientID,
		"LOYALTY_BRIDGE_API_CLIENT_SECRET": sim.DefaultClientSecret,
		"LOYALTY_BRIDGE_API_USERNAME":      sim.DefaultUsername,
		"LOYALTY_BRIDGE_API_PASSWORD":      password,
		"LOYALTY_BRIDGE_API_MAX_ATTEMPTS":  "1",
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	b := flagenv.New(fs, config.APIEnvPrefix)
	var cfg config.API
	cfg.Define(b, "")
	if err := b.Parse(nil, func(k string) (string, bool) { v, ok := envs[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	stack, err := cfg.Build(config.BuildOptions{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Close)
	return Conn{Client: stack.Client, Tokens: stack.Tokens, Grant: string(cfg.Grant)}
}

// call runs the named call with args parsed as its flags and body as its
// JSON body.
func call(t *testing.T, c Conn, name, body string, args ...string) (any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := Calls()[name].Define(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	return run(ctx, c, b)
}

func TestCallsAgainstSimulator(t *testing.T) {
	s := testkit.StartSim(t, testkit.SimOptions{Options: sim.Options{Members: 3, InitialBalance: 1000}})
	c := conn(t, s, sim.DefaultPassword)
	member := sim.MemberID(1)

	v, err := call(t, c, "token", "")
	info, ok := v.(TokenInfo)
	if err != nil || !ok || info.Grant != "password" || info.TokenType != "Bearer" || info.ExpiresIn <= 0 || info.ExpiresAt == "" {
		t.Fatalf("token: %+v, %v", v, err)
	}

	// The id as the argument.
	v, err = call(t, c, "profile", "", member)
	if p, ok := v.(*loyalty.MemberProfile); err != nil || !ok || p.LoyaltyID != member {
		t.Fatalf("profile: %+v, %v", v, err)
	}

	// Flags given override the body; flags not given fill what it left empty.
	v, err = call(t, c, "accrue", `{"loyaltyId":"`+member+`","transactionId":"T-json","transactionAmount":150000}`,
		"--transaction-id", "T-flag", "--description", `{"sku":"A"}`)
	if a, ok := v.(*loyalty.AccrualResult); err != nil || !ok || a.TransactionID != "T-flag" || a.BitReference == "" {
		t.Fatalf("accrue: %+v, %v", v, err)
	}
	if s.Effects("T-flag") != 1 || s.Effects("T-json") != 0 {
		t.Fatalf("the simulator saw T-flag %d times, T-json %d times", s.Effects("T-flag"), s.Effects("T-json"))
	}
	v, err = call(t, c, "lookup", "", "--loyalty-id", member, "--transaction-id", "T-flag")
	if tx, ok := v.(*loyalty.Transaction); err != nil || !ok || tx.TransactionID != "T-flag" {
		t.Fatalf("lookup: %+v, %v", v, err)
	}

	if _, err := call(t, c, "link", "", "--loyalty-id", member, "--partner-member-id", "P-1"); err != nil {
		t.Fatalf("link: %v", err)
	}
	_, err = call(t, c, "link", `{"loyaltyId":"`+member+`","partnerMemberId":"P-1"}`)
	var be *loyalty.BusinessError
	if !errors.As(err, &be) || be.Code != "MEMBER_IS_LINKED" {
		t.Fatalf("link again: %v", err)
	}
	env := Envelope(be)
	if errs, _ := env["errors"].(map[string]string); env["statusCode"] != 400 || errs["code"] != "MEMBER_IS_LINKED" || env["data"] != nil {
		t.Fatalf("envelope: %v", env)
	}
}

func TestRequestsThatCannotBeBuilt(t *testing.T) {
	s := testkit.StartSim(t, testkit.SimOptions{Options: sim.Options{Members: 1}})
	c := conn(t, s, sim.DefaultPassword)
	for _, tc := range []struct {
		name, body string
		args       []string
		want       string
	}{
		{"onboard", "", nil, "onboard takes its body as JSON"},
		{"accrue", `{"loyaltyId":"x","amout":1}`, nil, `request JSON: json: unknown field "amout"`},
		{"accrue", "", []string{"--date", "next tuesday"}, "--date: "},
		{"accrue", "", []string{"--description", `["not","an","object"]`}, "--description must be a JSON object"},
		{"accrue", "", []string{"--extra-data", `{"broken":`}, "--extra-data must be a JSON object"},
		{"lookup", `[1]`, nil, "request JSON: "},
	} {
		_, err := call(t, c, tc.name, tc.body, tc.args...)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s %v: %v, want a UsageError with %q", tc.name, tc.body, tc.args, err, tc.want)
		}
	}
	if s.TotalCalls(sim.EndpointAccrual) != 0 {
		t.Error("a request that could not be built was sent")
	}
}

// A refused grant is an AuthError, as a refused call would be.
func TestTokenRefused(t *testing.T) {
	s := testkit.StartSim(t, testkit.SimOptions{Options: sim.Options{Members: 1}})
	_, err := call(t, conn(t, s, "wrong-password"), "token", "")
	var ae *loyalty.AuthError
	if !errors.As(err, &ae) || strings.Contains(err.Error(), "wrong-password") {
		t.Fatalf("token with a wrong password: %v", err)
	}
}

func TestReadBody(t *testing.T) {
	file := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(file, []byte(`{"loyaltyId":"L"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src, in, want string
		usage         bool
	}{
		{"", "ignored", "", false},
		{"-", `{"from":"stdin"}`, `{"from":"stdin"}`, false},
		{"-", strings.Repeat("x", MaxBody+10), strings.Repeat("x", MaxBody), false},
		{file, "", `{"loyaltyId":"L"}`, false},
		{file + ".missing", "", "", true},
	} {
		got, err := ReadBody(tc.src, strings.NewReader(tc.in))
		var ue *UsageError
		if string(got) != tc.want || (err != nil) != tc.usage || (err != nil && !errors.As(err, &ue)) {
			t.Errorf("ReadBody(%.20q): %.20q, %v", tc.src, got, err)
		}
	}
}
