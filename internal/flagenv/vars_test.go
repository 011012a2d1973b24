package flagenv

import (
	"flag"
	"testing"
)

func TestVars(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("base-url", "", "")
	fs.String("password", "", "")
	b := New(fs, "P_")
	b.Secret("password", "")
	b.All()
	v := b.Vars()
	if v["base-url"] != (Var{Name: "P_BASE_URL"}) || v["password"] != (Var{Name: "P_PASSWORD", Secret: true}) || len(v) != 2 {
		t.Fatalf("%+v", v)
	}
}
