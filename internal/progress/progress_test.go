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

// On the caller's schedule, off a terminal: each Tick is a line with its
// note, whatever changed; Update between ticks draws nothing.
func TestTickOffTerminal(t *testing.T) {
	var out bytes.Buffer
	b := New(&out, "records replayed", time.Now())
	b.Tick(0, 7, "circuit open since 10:00:00")
	b.Update(1, 7)
	b.Update(2, 7)
	b.Tick(2, 7, "")
	b.Tick(2, 7, "")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "0/7 records replayed") || !strings.HasSuffix(lines[0], "  circuit open since 10:00:00") ||
		!strings.HasPrefix(lines[1], "2/7 records replayed") || !strings.HasPrefix(lines[2], "2/7 records replayed") {
		t.Fatalf("output:\n%s", out.String())
	}
}
