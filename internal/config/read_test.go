package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A setting that is defined, documented and validated but read by nothing
// is worse than none: --shutdown-timeout once was one. Every exported field
// of every section must be read outside its Define and Validate, either by
// one of the section's own methods (Build) or, elsewhere in the module, as
// <expr>.<Section>.<Field>.
func TestEverySettingIsRead(t *testing.T) {
	sections := map[string]reflect.Type{}
	for _, v := range []any{Kafka{}, Registry{}, Topics{}, Group{}, API{}, Partner{}, Processing{}, Delivery{}, Ledger{}, Parking{}, Ops{}, Tracing{}, Config{}} {
		sections[reflect.TypeOf(v).Name()] = reflect.TypeOf(v)
	}
	// Read where they act: AllowInsecure by every section's Validate, File
	// by flagenv under the flag name "config".
	exempt := map[string]bool{"AllowInsecure": true, "Config.File": true}
	read := map[string]bool{}
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "deploy") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		inConfig := f.Name.Name == "config" && filepath.Base(filepath.Dir(path)) == "config"
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			receiver := ""
			if inConfig && fn.Recv != nil && len(fn.Recv.List) == 1 {
				receiver = typeName(fn.Recv.List[0].Type)
				if fn.Name.Name == "Define" || fn.Name.Name == "Validate" {
					continue
				}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.SelectorExpr); ok {
					if _, isSection := sections[x.Sel.Name]; isSection {
						read[x.Sel.Name+"."+sel.Sel.Name] = true
					}
				}
				if receiver != "" {
					read[receiver+"."+sel.Sel.Name] = true
				}
				// Config's own fields are read through the value itself.
				read["Config."+sel.Sel.Name] = read["Config."+sel.Sel.Name] || !inConfig
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range sections {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() || exempt[f.Name] || exempt[name+"."+f.Name] {
				continue
			}
			if _, isSection := sections[f.Type.Name()]; isSection && name == "Config" {
				continue
			}
			if !read[name+"."+f.Name] {
				t.Errorf("%s.%s is defined but read nowhere outside Define and Validate", name, f.Name)
			}
		}
	}
}

func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}
