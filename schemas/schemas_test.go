package schemas_test

import (
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/loyalty-bridge/loyalty-bridge/schemas"
)

// Every schema parses on its own (no cross-file references, so other teams
// can register or generate code from any one file) and documents every field.
func TestSchemasParseAndDocumentEveryField(t *testing.T) {
	for name, text := range map[string]string{
		"purchase":          schemas.Purchase(),
		"refund-redemption": schemas.RefundRedemption(),
		"member-onboarding": schemas.MemberOnboarding(),
		"result":            schemas.Result(),
		"error":             schemas.Error(),
	} {
		s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var records []*avro.RecordSchema
		var walk func(avro.Schema)
		walk = func(s avro.Schema) {
			switch s := s.(type) {
			case *avro.RecordSchema:
				records = append(records, s)
				for _, f := range s.Fields() {
					walk(f.Type())
				}
			case *avro.UnionSchema:
				for _, b := range s.Types() {
					walk(b)
				}
			}
		}
		walk(s)
		for _, r := range records {
			if r.Namespace() != schemas.Namespace {
				t.Errorf("%s: %s: namespace %q", name, r.Name(), r.Namespace())
			}
			if r.Doc() == "" {
				t.Errorf("%s: %s has no doc", name, r.Name())
			}
			for _, f := range r.Fields() {
				if f.Doc() == "" {
					t.Errorf("%s: %s.%s has no doc", name, r.Name(), f.Name())
				}
			}
		}
	}
}
