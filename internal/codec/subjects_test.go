package codec_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/schemas"
)

func TestRegisterAndCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := srfake.New()
	defer reg.Close()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
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
	if err != nil || len(done) != 9 || done[0].Subject != "loyalty.purchase-value" || done[0].ID == 0 || done[0].Version != 1 {
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
	if _, _, err := reg.RegisterSchema("loyalty.purchase-value", sr.Schema{Schema: bad, Type: sr.TypeAvro}); err != nil {
		t.Fatal(err)
	}
	got := checkAll()
	p := got["loyalty.purchase-value"]
	if len(got) != 1 || len(p) == 0 || !strings.HasPrefix(p[0], "BACKWARD: ours cannot read data written with version 2") {
		t.Fatalf("an incompatible version: %v", got)
	}
	// Under NONE anything goes.
	if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "loyalty.purchase-value"); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if got := checkAll(); len(got) != 0 {
		t.Fatalf("under NONE: %v", got)
	}
}
