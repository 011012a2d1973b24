package codec

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/schemas"
)

// error.avsc is what consumers read to learn the reasons an error event
// may carry: its doc of `reason` names every decode failure kind declared
// in errors.go (TOO_LARGE was missing once).
func TestErrorSchemaNamesEveryDecodeKind(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || vs.Type == nil || len(vs.Values) != 1 {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "DecodeKind" {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				kinds = append(kinds, s)
			}
		}
		return true
	})
	if len(kinds) < 10 {
		t.Fatalf("found %d decode kinds in errors.go: %v", len(kinds), kinds)
	}
	var schema struct {
		Fields []struct{ Name, Doc string } `json:"fields"`
	}
	if err := json.Unmarshal([]byte(schemas.Error()), &schema); err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, f := range schema.Fields {
		if f.Name == "reason" {
			doc = f.Doc
		}
	}
	for _, k := range kinds {
		if !strings.Contains(doc, k) {
			t.Errorf("error.avsc's reason doc does not name %s: %q", k, doc)
		}
	}
}
