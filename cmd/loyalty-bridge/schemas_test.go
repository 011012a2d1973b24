package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/loyalty-bridge/loyalty-bridge/schemas"
)

// The schemas command end to end; package codec tests the verdicts.
func TestSchemasCheck(t *testing.T) {
	s := newEventsStack(t)
	if code, out, errs := s.cli(t, "", "schemas", "check"); code != 0 || strings.Count(out, "ok") != 9 {
		t.Fatalf("check of an empty registry: %d\n%s%s", code, out, errs)
	}
	s.cli(t, "", "schemas", "register")
	if code, out, errs := s.cli(t, "", "schemas", "check"); code != 0 {
		t.Fatalf("check after register: %d\n%s%s", code, out, errs)
	}
	// Someone registered a purchase schema whose amount is a string: our
	// reader (amount double) cannot read data written with it.
	bad := strings.Replace(schemas.Purchase(), `"name": "amount", "type": "double"`, `"name": "amount", "type": "string"`, 1)
	if _, _, err := s.reg.RegisterSchema("loyalty.purchase-value", sr.Schema{Schema: bad, Type: sr.TypeAvro}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := s.cli(t, "", "schemas", "check")
	if code == 0 {
		t.Fatalf("check passed an incompatible subject:\n%s", out)
	}
	if !strings.Contains(out, "INCOMPATIBLE loyalty.purchase-value: BACKWARD") || !strings.Contains(errs, "loyalty.purchase-value") ||
		strings.Contains(out, "INCOMPATIBLE loyalty.refund-redemption-value") {
		t.Fatalf("check output:\n%s%s", out, errs)
	}
}
