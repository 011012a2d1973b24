package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	start := time.Now().Add(-10 * time.Second)
	for _, tc := range []struct {
		done, planned int
		want          []string
	}{
		{50, 100, []string{"50/100 records replayed (50%)", "/s", "ETA "}},
		{100, 100, []string{"100/100 records replayed (100%)", "ETA 0s"}},
		{0, 100, []string{"0/100", "0/s", "ETA ?"}},
		{0, 0, []string{"0/0", "(100%)"}},
	} {
		got := New(&bytes.Buffer{}, "records replayed", start).line(tc.done, tc.planned)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("line(%d, %d) = %q, want %q in it", tc.done, tc.planned, got, w)
			}
		}
	}
}

// Off a terminal: the first Show writes a plain line, one right after it
// does not, and Finish always writes the final state.
func TestPlainOutput(t *testing.T) {
	var out bytes.Buffer
	b := New(&out, "events answered", time.Now())
	b.Show(1, 10)
	b.Show(2, 10)
	b.Finish(10, 10)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "1/10 events answered") || !strings.HasPrefix(lines[1], "10/10 events answered") {
		t.Fatalf("output:\n%s", out.String())
	}
	if strings.Contains(out.String(), "\r") {
		t.Fatal("a bar drawn off a terminal")
	}
}
