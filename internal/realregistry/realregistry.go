package realregistry

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
)

// EnvRegistry is the environment variable that names a real registry's
// base URL (for Apicurio Registry, its /apis/ccompat/v7).
const EnvRegistry = "LOYALTY_BRIDGE_TEST_REGISTRY"

// URL returns the URL in EnvRegistry, trimmed, or "" when it is unset or
// blank: then the caller uses srfake.
func URL() string { return strings.TrimSpace(os.Getenv(EnvRegistry)) }

// Require returns URL, or skips tb when EnvRegistry names no registry.
func Require(tb testing.TB) string {
	tb.Helper()
	u := URL()
	if u == "" {
		tb.Skipf("no real Schema Registry: set %s (scripts/registry start prints it)", EnvRegistry)
	}
	return u
}

// Open returns the URL of the registry tb runs against: the real one in
// EnvRegistry, else a new srfake that is closed when tb ends.
func Open(tb testing.TB) string {
	tb.Helper()
	if u := URL(); u != "" {
		return u
	}
	reg := srfake.New()
	tb.Cleanup(reg.Close)
	return reg.URL()
}

// Topics returns input topic names that no other test, and no earlier run
// against the same registry, uses: realkafka.Name(tb, "reg"), that is "reg-",
// tb's name made safe for Kafka, 8 random
// hex digits, then ".purchase", ".refund-redemption" or
// ".member-onboarding". It does so on srfake too, so that a test reads the
// same against both.
func Topics(tb testing.TB) codec.Topics {
	tb.Helper()
	// realkafka.Name keeps a name at 209 characters, so that
	// ".refund-redemption.result" fits in Kafka's 249.
	p := realkafka.Name(tb, "reg")
	return codec.Topics{Purchase: p + ".purchase", RefundRedemption: p + ".refund-redemption", MemberOnboarding: p + ".member-onboarding"}
}

// Force registers schema as the next version of subject whatever the
// subject's compatibility level, and returns its id: it sets the subject's
// level to NONE, registers, and then sets the subject's level to the
// registry's global one. It does not delete the subject's level instead:
// Apicurio Registry 3.3.3 answers DELETE /config/{subject} of a subject at
// NONE with 200 but keeps NONE in force (another level it does delete). A
// subject that had a level of its own loses it.
func Force(ctx context.Context, cl *sr.Client, subject, schema string) (int, error) {
	g := cl.Compatibility(ctx)
	if len(g) != 1 || g[0].Err != nil {
		return 0, fmt.Errorf("force %s: read the global compatibility level: %v", subject, g)
	}
	if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, subject); len(r) != 1 || r[0].Err != nil {
		return 0, fmt.Errorf("force %s: set compatibility NONE: %v", subject, r)
	}
	ss, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: schema, Type: sr.TypeAvro})
	if err != nil {
		return 0, fmt.Errorf("force %s: register: %w", subject, err)
	}
	if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: g[0].Level}, subject); len(r) != 1 || r[0].Err != nil {
		return 0, fmt.Errorf("force %s: set compatibility %s again: %v", subject, g[0].Level, r)
	}
	return ss.ID, nil
}
