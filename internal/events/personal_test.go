package events_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/schemas"
)

// personalLooking are name parts of fields that hold, or may hold,
// personal data. A schema field whose name contains one must be in
// events.PersonalFields or in notPersonal.
var personalLooking = []string{"phone", "mobile", "name", "mail", "birth", "dob", "address", "street", "city",
	"district", "ward", "province", "postal", "zip", "passport", "idnumber", "nationalid", "placeof"}

// notPersonal are schema fields whose names look personal but are not,
// each with why.
var notPersonal = map[string]string{
	"apiErrorName": "the API's error name, e.g. BAD_REQUEST",
}

// schemaField is one field of a record in schemas/.
type schemaField struct {
	schema, record, name, doc string
}

func schemaFields(t *testing.T) []schemaField {
	t.Helper()
	var out []schemaField
	var walk func(file string, node any)
	walk = func(file string, node any) {
		switch n := node.(type) {
		case []any:
			for _, x := range n {
				walk(file, x)
			}
		case map[string]any:
			if n["type"] == "record" {
				fields, _ := n["fields"].([]any)
				for _, f := range fields {
					fm, _ := f.(map[string]any)
					name, _ := fm["name"].(string)
					doc, _ := fm["doc"].(string)
					rec, _ := n["name"].(string)
					out = append(out, schemaField{file, rec, name, doc})
					walk(file, fm["type"])
				}
				return
			}
			for _, k := range []string{"type", "items", "values"} {
				if v, ok := n[k]; ok {
					walk(file, v)
				}
			}
		}
	}
	for file, text := range map[string]string{"purchase.avsc": schemas.Purchase(), "refund-redemption.avsc": schemas.RefundRedemption(),
		"member-onboarding.avsc": schemas.MemberOnboarding(), "result.avsc": schemas.Result(), "error.avsc": schemas.Error()} {
		var node any
		if err := json.Unmarshal([]byte(text), &node); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		walk(file, node)
	}
	if len(out) < 50 {
		t.Fatalf("found only %d schema fields: the walk is broken", len(out))
	}
	return out
}

// Every schema field that looks like personal data (by name, or because its
// doc says "Personal data.") is in the list; every name in the list is a
// field of the schemas.
func TestPersonalFieldsCoverSchemas(t *testing.T) {
	listed := map[string]bool{}
	for _, n := range events.PersonalFieldNames() {
		listed[n] = true
	}
	inSchemas := map[string]bool{}
	for _, f := range schemaFields(t) {
		inSchemas[f.name] = true
		if listed[f.name] {
			continue
		}
		if _, ok := notPersonal[f.name]; ok {
			continue
		}
		lower := strings.ToLower(f.name)
		for _, part := range personalLooking {
			if strings.Contains(lower, part) {
				t.Errorf("%s %s.%s looks like personal data (%q) and is not in events.PersonalFields", f.schema, f.record, f.name, part)
			}
		}
		if strings.Contains(f.doc, "Personal data.") { // the schemas' marker sentence
			t.Errorf("%s %s.%s is documented as personal data and is not in events.PersonalFields", f.schema, f.record, f.name)
		}
	}
	for _, f := range events.PersonalFields() {
		if !inSchemas[f.Name] {
			t.Errorf("events.PersonalFields names %q, which no schema has", f.Name)
		}
	}
}

// The partner API's bodies (internal/loyalty's mirror of the spec) too:
// every field that looks like personal data is listed, as a name or as an
// alias, so that the logger redacts it under the partner's name.
func TestPersonalFieldsCoverPartnerAPI(t *testing.T) {
	listed := map[string]bool{}
	for _, n := range events.PersonalFieldNames() {
		listed[n] = true
	}
	for _, v := range []any{loyalty.MemberProfile{}, loyalty.ExtendedProfile{}, loyalty.OnboardRequest{}, loyalty.OnboardedMember{},
		loyalty.LinkRequest{}, loyalty.LinkResult{}, loyalty.AccrualRequest{}, loyalty.AccrualResult{}, loyalty.RedemptionRequest{},
		loyalty.RedemptionResult{}, loyalty.LookupRequest{}, loyalty.Transaction{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if listed[name] {
				continue
			}
			for _, part := range personalLooking {
				if strings.Contains(strings.ToLower(name), part) {
					t.Errorf("loyalty.%s.%s (%q) looks like personal data (%q) and is not in events.PersonalFields", typ.Name(), typ.Field(i).Name, name, part)
				}
			}
		}
	}
}

// Every Name is a string or *string field of MemberOnboardRequested (by its
// avro tag, which its json tag repeats); aliases are not fields; no name
// appears twice.
func TestPersonalFieldsAreOnboardingFields(t *testing.T) {
	typ := reflect.TypeFor[events.MemberOnboardRequested]()
	fields := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := f.Tag.Get("avro")
		if j, _, _ := strings.Cut(f.Tag.Get("json"), ","); j != name {
			t.Errorf("%s: avro tag %q, json tag %q", f.Name, name, j)
		}
		fields[name] = f.Type
	}
	strType, ptrType := reflect.TypeFor[string](), reflect.TypeFor[*string]()
	for _, f := range events.PersonalFields() {
		if ft := fields[f.Name]; ft != strType && ft != ptrType {
			t.Errorf("%q is not a string field of MemberOnboardRequested (%v)", f.Name, ft)
		}
		for _, a := range f.Aliases {
			if _, ok := fields[a]; ok {
				t.Errorf("alias %q of %q is a field of its own", a, f.Name)
			}
		}
	}
	names := events.PersonalFieldNames()
	if len(slices.Compact(slices.Sorted(slices.Values(names)))) != len(names) {
		t.Errorf("a name appears twice: %v", names)
	}
}

// withCanary is a valid onboarding with canary in the field named name,
// set through the event's JSON form (its json tags are its Avro names).
func withCanary(t *testing.T, name, canary string) *events.MemberOnboardRequested {
	t.Helper()
	b, err := json.Marshal(validOnboard())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m[name] = canary
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	var e events.MemberOnboardRequested
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

// Each listed field, set to a canary: PersonalData reports it under its
// name, and neither Redact's copy nor any print form shows it.
func TestRedactEveryPersonalField(t *testing.T) {
	for _, f := range events.PersonalFields() {
		t.Run(f.Name, func(t *testing.T) {
			canary := "canary-" + f.Name
			e := withCanary(t, f.Name, canary)
			if got := e.PersonalData()[f.Name]; got != canary {
				t.Errorf("PersonalData()[%q] = %q", f.Name, got)
			}
			r := e.Redact()
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			out := string(b) + fmt.Sprintf(" %v %+v %s", e, *e, e)
			if strings.Contains(out, canary) {
				t.Errorf("%s survives: %s", f.Name, out)
			}
			if !strings.Contains(string(b), fmt.Sprintf("%q:%q", f.Name, events.Redacted)) {
				t.Errorf("Redact did not mark %s: %s", f.Name, b)
			}
			if e.PersonalData()[f.Name] != canary {
				t.Error("Redact wrote through to the original")
			}
		})
	}
}
