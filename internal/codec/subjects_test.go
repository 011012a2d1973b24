package codec_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realregistry"
	"github.com/loyalty-bridge/loyalty-bridge/schemas"
)

func TestRegisterAndCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, _ := newRegistry(t)
	topics := realregistry.Topics(t)
	purchase := codec.Subject(topics.Purchase)
	subjects := codec.SubjectsOf(topics)
	checkAll := func() map[string][]string {
		t.Helper()
		out := map[string][]string{}
		for _, s := range subjects {
			problems, err := codec.Check(ctx, cl, s)
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) > 0 {
				out[s.Subject] = problems
			}
		}
		return out
	}
	if got := checkAll(); len(got) != 0 {
		t.Fatalf("an empty registry: %v", got)
	}
	done, err := codec.Register(ctx, cl, topics)
	if err != nil || len(done) != 9 || done[0].Subject != purchase || done[0].ID == 0 || done[0].Version != 1 {
		t.Fatalf("Register: %+v, %v", done, err)
	}
	if again, err := codec.Register(ctx, cl, topics); err != nil || again[0].ID != done[0].ID {
		t.Fatalf("Register again: %+v, %v", again, err)
	}
	if got := checkAll(); len(got) != 0 {
		t.Fatalf("after Register: %v", got)
	}

	// Someone registered a purchase schema whose amount is a string: the
	// bridge's reader (amount double) cannot read data written with it.
	bad := strings.Replace(schemas.Purchase(), `"name": "amount", "type": "double"`, `"name": "amount", "type": "string"`, 1)
	if _, err := realregistry.Force(ctx, cl, purchase, bad); err != nil {
		t.Fatal(err)
	}
	got := checkAll()
	p := got[purchase]
	if len(got) != 1 || len(p) == 0 || !strings.HasPrefix(p[0], "BACKWARD: ours cannot read data written with version 2") {
		t.Fatalf("an incompatible version: %v", got)
	}
	// Under NONE anything goes.
	if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, purchase); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if got := checkAll(); len(got) != 0 {
		t.Fatalf("under NONE: %v", got)
	}
}

// purchaseWith returns the bridge's purchase schema with its amount field
// replaced by field (a JSON object, or several).
func purchaseWith(t *testing.T, field string) string {
	t.Helper()
	const amount = `{"name": "amount", "type": "double", "doc": "Purchase amount in currency units (API transactionAmount). Must be >= 0."}`
	if !strings.Contains(schemas.Purchase(), amount) {
		t.Fatal("the purchase schema's amount field changed: update purchaseWith")
	}
	return strings.Replace(schemas.Purchase(), amount, field, 1)
}

// An upstream producer registered the purchase subject first, with an
// amount the bridge cannot read, and set no level on the subject: the
// registry's global level (BACKWARD) applies. check names the field (the
// registry's own verdict may not: Apicurio's gives no reason); a real
// registry refuses to register the bridge's schema, and the error says so.
func TestForeignFirstVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, _ := newRegistry(t)
	topics := realregistry.Topics(t)
	s := codec.SubjectsOf(topics)[0]
	if s.Topic != topics.Purchase {
		t.Fatalf("first subject %+v, want the purchase topic's", s)
	}
	if _, err := cl.CreateSchema(ctx, s.Subject, sr.Schema{Schema: purchaseWith(t, `{"name": "amount", "type": "string"}`), Type: sr.TypeAvro}); err != nil {
		t.Fatal(err)
	}
	problems, err := codec.Check(ctx, cl, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) == 0 || !strings.HasPrefix(problems[0], "BACKWARD: ours cannot read data written with version 1: field amount: ") {
		t.Fatalf("check: %q", problems)
	}
	// In a union, the record and the field.
	for _, rs := range codec.SubjectsOf(topics) {
		if rs.Topic != topics.RefundRedemption {
			continue
		}
		const used = `{"name": "usedPoint", "type": "long",`
		if !strings.Contains(rs.Schema, used) {
			t.Fatal("the refund-redemption schema's usedPoint field changed: update the test")
		}
		theirs := strings.Replace(rs.Schema, used, `{"name": "usedPoint", "type": "string",`, 1)
		if _, err := cl.CreateSchema(ctx, rs.Subject, sr.Schema{Schema: theirs, Type: sr.TypeAvro}); err != nil {
			t.Fatal(err)
		}
		up, err := codec.Check(ctx, cl, rs)
		if err != nil || len(up) == 0 || !strings.HasPrefix(up[0], "BACKWARD: ours cannot read data written with version 1: RedemptionRequested field usedPoint: ") {
			t.Fatalf("check of a union: %q, %v", up, err)
		}
	}
	real := realregistry.URL() != ""
	// srfake answers every compatibility check with yes.
	if real && !strings.HasPrefix(problems[len(problems)-1], "the registry says incompatible") {
		t.Errorf("check of a subject the registry finds incompatible: %q", problems)
	}
	done, err := codec.Register(ctx, cl, topics)
	if !real {
		return // srfake registers anything
	}
	if len(done) != 0 || !errors.Is(err, codec.ErrRefused) || !strings.Contains(err.Error(), "register "+s.Subject+" (the purchase schema)") {
		t.Fatalf("register over an incompatible version: %+v, %v", done, err)
	}
	if _, err := codec.New(ctx, codec.Options{Registry: cl, Topics: topics, Register: true}); !errors.Is(err, codec.ErrRefused) || errors.Is(err, codec.ErrRegistry) {
		t.Fatalf("New with Register over an incompatible version: %v; want ErrRefused, not the transient ErrRegistry", err)
	}
}

// Against a real registry under BACKWARD: an upstream's compatible change
// (a new optional field) is accepted, and the bridge reads records written
// with it; an incompatible one is refused.
func TestRegistryEnforcesEvolution(t *testing.T) {
	realregistry.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, _ := newRegistry(t)
	topics := realregistry.Topics(t)
	if _, err := codec.Register(ctx, cl, topics); err != nil {
		t.Fatal(err)
	}
	c, err := codec.New(ctx, codec.Options{Registry: cl, Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	subject := codec.Subject(topics.Purchase)
	evolved := purchaseWith(t, `{"name": "amount", "type": "double"}, {"name": "channel", "type": ["null", "string"], "default": null}`)
	ss, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: evolved, Type: sr.TypeAvro})
	if err != nil || ss.Version != 2 {
		t.Fatalf("a compatible change: %+v, %v", ss, err)
	}
	b := wire(t, ss.ID, evolved, map[string]any{"transactionId": "T-7", "loyaltyId": "L-7", "itemId": nil, "transactionDate": when,
		"amount": 12.5, "channel": map[string]any{"string": "app"}, "currency": "EUR", "description": nil, "extraData": nil})
	got, err := c.DecodeEvent(ctx, topics.Purchase, b)
	if err != nil {
		t.Fatal(err)
	}
	want := &events.PurchaseCompleted{TransactionID: "T-7", LoyaltyID: "L-7", TransactionDate: when, Amount: 12.5, Currency: "EUR"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("a record of the new version: got %+v, want %+v", got, want)
	}
	problems, err := codec.Check(ctx, cl, codec.SubjectsOf(topics)[0])
	if err != nil || len(problems) != 0 {
		t.Fatalf("check after a compatible change: %q, %v", problems, err)
	}

	_, err = cl.CreateSchema(ctx, subject, sr.Schema{Schema: purchaseWith(t, `{"name": "amount", "type": "string"}`), Type: sr.TypeAvro})
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusConflict || re.ErrorCode != sr.ErrIncompatibleSchema.Code {
		t.Fatalf("an incompatible change: %v, want HTTP 409 with error code 409", err)
	}
	versions, err := cl.Schemas(ctx, subject)
	if err != nil || len(versions) != 2 {
		t.Fatalf("versions after a refused change: %d, %v", len(versions), err)
	}
}

// Registering costs one request per subject however many other subjects
// hold the same schema. franz-go's CreateSchema asks for every subject and
// version that uses the new id, one request each: the bridge's result and
// error schemas are shared by three subjects each, and a registry shared by
// many topics (or by every run of this suite) makes that list grow without
// bound.
func TestRegisterRequestsPerSubject(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, reg := newRegistry(t)
	for range 2 {
		if _, err := codec.Register(ctx, cl, realregistry.Topics(t)); err != nil {
			t.Fatal(err)
		}
	}
	topics := realregistry.Topics(t)
	n := len(codec.SubjectsOf(topics))
	before := reg.requests.Load()
	if _, err := codec.New(ctx, codec.Options{Registry: cl, Topics: topics, Register: true}); err != nil {
		t.Fatal(err)
	}
	if got := reg.requests.Load() - before; got != int64(n) {
		t.Errorf("New with Register: %d requests for %d subjects, want one each", got, n)
	}
	before = reg.requests.Load()
	done, err := codec.Register(ctx, cl, topics)
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.requests.Load() - before; got != int64(2*n) {
		t.Errorf("Register: %d requests for %d subjects, want two each (register, then look up the version)", got, n)
	}
	for _, d := range done {
		if d.ID == 0 || d.Version != 1 {
			t.Errorf("Register: %+v, want an id and version 1", d)
		}
	}
}
