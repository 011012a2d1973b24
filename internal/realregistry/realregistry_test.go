package realregistry_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/realregistry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTopicsAreTheTestsOwn(t *testing.T) {
	a, b := realregistry.Topics(t), realregistry.Topics(t)
	if a == b || a.Purchase == a.RefundRedemption {
		t.Fatalf("not unique: %+v %+v", a, b)
	}
	for _, name := range []string{a.Purchase, a.RefundRedemption, a.MemberOnboarding} {
		if !strings.HasPrefix(name, "reg-TestTopicsAreTheTestsOwn-") || len(name+".result") > 249 {
			t.Errorf("topic %q", name)
		}
	}
	t.Run("a/b c", func(t *testing.T) {
		if p := realregistry.Topics(t).Purchase; !strings.HasPrefix(p, "reg-TestTopicsAreTheTestsOwn_a_b_c-") {
			t.Errorf("subtest topic %q: not safe for Kafka", p)
		}
	})
}

// Force registers what the subject's level refuses, and leaves the subject
// at the global level, enforced.
func TestForce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	cl, err := sr.NewClient(sr.URLs(realregistry.Open(t)), sr.HTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	subject := realregistry.Topics(t).Purchase + "-value"
	record := func(typ string) sr.Schema {
		return sr.Schema{Schema: `{"type":"record","name":"R","fields":[{"name":"f","type":"` + typ + `"}]}`, Type: sr.TypeAvro}
	}
	if _, err := cl.CreateSchema(ctx, subject, record("double")); err != nil {
		t.Fatal(err)
	}
	id, err := realregistry.Force(ctx, cl, subject, record("string").Schema)
	if err != nil || id == 0 {
		t.Fatalf("Force: %d, %v", id, err)
	}
	if vs, err := cl.Schemas(ctx, subject); err != nil || len(vs) != 2 || vs[1].ID != id {
		t.Fatalf("versions after Force: %+v, %v", vs, err)
	}
	g := cl.Compatibility(ctx)
	if r := cl.Compatibility(ctx, subject); len(r) != 1 || r[0].Err != nil || len(g) != 1 || r[0].Level != g[0].Level {
		t.Fatalf("subject level after Force %+v, global %+v", r, g)
	}
	if realregistry.URL() == "" {
		return // srfake enforces no level
	}
	// Apicurio 3.3.3 would still be at NONE here had Force deleted the
	// subject's level rather than set it.
	_, err = cl.CreateSchema(ctx, subject, record("boolean"))
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != sr.ErrIncompatibleSchema.Code {
		t.Fatalf("an incompatible schema after Force: %v, want refused", err)
	}
}
