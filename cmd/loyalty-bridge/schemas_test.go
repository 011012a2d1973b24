package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realregistry"
	"github.com/loyalty-bridge/loyalty-bridge/schemas"
)

// schemasStack is what `loyalty-bridge schemas` needs: a registry (the real
// one in LOYALTY_BRIDGE_TEST_REGISTRY, else srfake) and topics of the
// test's own, so that a registry shared with other tests and earlier runs
// holds no subject of theirs.
type schemasStack struct {
	url    string
	topics codec.Topics
	cl     *sr.Client
}

func newSchemasStack(t *testing.T) schemasStack {
	t.Helper()
	// Registered first, so it runs last: after srfake is closed, which
	// closes the connections of every client. A real registry stays up:
	// each command's client keeps its connection to it alive in the
	// transport's idle pool, which closes it after 90 s.
	ignore := []goleak.Option{goleak.IgnoreCurrent()}
	if realregistry.URL() != "" {
		ignore = append(ignore, goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
	}
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
	url := realregistry.Open(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	cl, err := sr.NewClient(sr.URLs(url), sr.HTTPClient(&http.Client{Transport: tr, Timeout: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	return schemasStack{url: url, topics: realregistry.Topics(t), cl: cl}
}

// cli runs loyalty-bridge with args, configured through the environment as
// an operator would.
func (s schemasStack) cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	envs := map[string]string{
		"LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL":     s.url,
		"LOYALTY_BRIDGE_PURCHASE_TOPIC":          s.topics.Purchase,
		"LOYALTY_BRIDGE_REFUND_REDEMPTION_TOPIC": s.topics.RefundRedemption,
		"LOYALTY_BRIDGE_MEMBER_ONBOARDING_TOPIC": s.topics.MemberOnboarding,
	}
	lookup := func(k string) (string, bool) { v, ok := envs[k]; return v, ok }
	code = run(ctx, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, lookup: lookup}, args)
	return code, out.String(), errb.String()
}

// amountString is the bridge's purchase schema with amount a string: data
// written with it cannot be read by the bridge (amount double), so under
// BACKWARD neither may follow the other.
func amountString(t *testing.T) string {
	t.Helper()
	const amount = `"name": "amount", "type": "double"`
	if !strings.Contains(schemas.Purchase(), amount) {
		t.Fatal("the purchase schema's amount field changed: update amountString")
	}
	return strings.Replace(schemas.Purchase(), amount, `"name": "amount", "type": "string"`, 1)
}

// The schemas command end to end; package codec tests the verdicts.
func TestSchemasCheck(t *testing.T) {
	s := newSchemasStack(t)
	purchase := codec.Subject(s.topics.Purchase)
	if code, out, errs := s.cli(t, "schemas", "check"); code != 0 || strings.Count(out, "ok") != 9 {
		t.Fatalf("check of an empty registry: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := s.cli(t, "schemas", "register"); code != 0 || strings.Count(out, "registered") != 9 ||
		!strings.Contains(out, "registered "+purchase) || !strings.Contains(out, "version 1 (purchase)") {
		t.Fatalf("register: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := s.cli(t, "schemas", "check"); code != 0 {
		t.Fatalf("check after register: %d\n%s%s", code, out, errs)
	}
	// Someone registered a purchase schema whose amount is a string (with
	// the subject's compatibility turned off, as a real registry would not
	// take it otherwise): our reader cannot read data written with it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := realregistry.Force(ctx, s.cl, purchase, amountString(t)); err != nil {
		t.Fatal(err)
	}
	code, out, errs := s.cli(t, "schemas", "check")
	if code != 1 {
		t.Fatalf("check of an incompatible subject: exit %d, want 1:\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "INCOMPATIBLE "+purchase+": BACKWARD: ours cannot read data written with version 2: field amount: ") ||
		!strings.Contains(errs, "incompatible with the registry: "+purchase+"\n") ||
		strings.Contains(out, "INCOMPATIBLE "+codec.Subject(s.topics.RefundRedemption)) {
		t.Fatalf("check output:\n%s%s", out, errs)
	}
}

// A real registry refuses to register the bridge's schema over a subject
// whose versions it cannot follow, and register says so and what to run.
// srfake registers anything.
func TestSchemasRegisterRefused(t *testing.T) {
	realregistry.Require(t)
	s := newSchemasStack(t)
	purchase := codec.Subject(s.topics.Purchase)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.cl.CreateSchema(ctx, purchase, sr.Schema{Schema: amountString(t), Type: sr.TypeAvro}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := s.cli(t, "schemas", "register")
	if code != 1 || out != "" {
		t.Fatalf("register over an incompatible subject: exit %d, want 1 and nothing registered:\n%s%s", code, out, errs)
	}
	want := "loyalty-bridge schemas: register " + purchase + " (the purchase schema): the registry refuses the bridge's schema as incompatible with the subject's versions (loyalty-bridge schemas check names the fields): "
	if !strings.HasPrefix(errs, want) {
		t.Fatalf("register's error:\n%s\nwant it to start with\n%s", errs, want)
	}
	if code, out, errs := s.cli(t, "schemas", "check"); code != 1 ||
		!strings.Contains(out, "INCOMPATIBLE "+purchase+": BACKWARD: ours cannot read data written with version 1: field amount: ") ||
		!strings.Contains(out, "INCOMPATIBLE "+purchase+": the registry says incompatible") {
		t.Fatalf("check after a refused register: %d\n%s%s", code, out, errs)
	}
}
