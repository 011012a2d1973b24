package pipeline

import "testing"

// FuzzParseHorizon reads offset commit metadata, which anything that can
// commit to the group writes (an older bridge, an offsets tool, kcat):
// whatever it holds, it is a horizon only when it is exactly what
// horizonMetadata or releasedMetadata would write for a non-negative
// offset, so a foreign string never moves where the guard starts.
func FuzzParseHorizon(f *testing.F) {
	for _, s := range []string{
		horizonMetadata(0), horizonMetadata(1234), releasedMetadata(99), horizonPrefix, horizonPrefix + "-1",
		horizonPrefix + "+5", horizonPrefix + "007", horizonPrefix + "9223372036854775808", horizonPrefix + "12/released/released",
		horizonPrefix + " 12", "", "member-1", releasedSuffix,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, meta string) {
		h, released, ok := parseHorizon(meta)
		if !ok {
			if h != 0 || released {
				t.Fatalf("%q: not a horizon, yet h=%d released=%v", meta, h, released)
			}
			return
		}
		want := horizonMetadata(h)
		if released {
			want = releasedMetadata(h)
		}
		if h < 0 || meta != want {
			t.Fatalf("%q read as horizon %d released=%v, which is written %q", meta, h, released, want)
		}
	})
}
