package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
)

// committedRow reads partition p's COMMITTED and LAG from the offsets table.
func committedRow(t *testing.T, out string, p int) (committed string, lag int) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^loyalty\.purchase +` + strconv.Itoa(p) + ` +(\S+) +\d+ +(\d+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no row for partition %d:\n%s", p, out)
	}
	lag, _ = strconv.Atoi(m[2])
	return m[1], lag
}

// caughtUp reports whether both partitions of loyalty.purchase show
// committed offset 5 with no lag.
func caughtUp(t *testing.T, out string) bool {
	for p := range 2 {
		if c, lag := committedRow(t, out, p); c != "5" || lag != 0 {
			return false
		}
	}
	return true
}

func TestOffsetsShowAndReset(t *testing.T) {
	s := newReplayStack(t)
	stop := s.live(t, nil)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Minute)
	s.produce(t, func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }, ids("off", 10)...)
	s.replies(t, codec.DefaultPurchaseTopic+".result", 10)

	// Show: state, members, committed (polled: commits are periodic), lag.
	deadline := time.Now().Add(30 * time.Second)
	var out, errs string
	var code int
	for {
		code, out, errs = s.cli(t, "offsets", "--topic", "loyalty.purchase")
		if code == 0 && caughtUp(t, out) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
	if code != 0 || !strings.Contains(out, "group loyalty-bridge: Stable, 1 member (") || !strings.Contains(out, "total") {
		t.Fatalf("offsets: exit %d\n%s%s", code, out, errs)
	}
	if !caughtUp(t, out) {
		t.Fatalf("the live bridge's commits are not shown:\n%s", out)
	}
	code, out, _ = s.cli(t, "offsets")
	for _, topic := range codec.DefaultTopics().Inputs() {
		if code != 0 || !strings.Contains(out, topic+" ") {
			t.Errorf("offsets of every input: %s missing:\n%s", topic, out)
		}
	}

	// Reset refuses while the bridge is a member; --force is refused by
	// Kafka itself.
	code, out, errs = s.cli(t, "offsets", "reset", "--topic", "loyalty.purchase", "--to-earliest")
	if code != 1 || !strings.Contains(errs, "1 live member (") || !strings.Contains(errs, "--force") {
		t.Fatalf("reset with a live member: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = s.cli(t, "offsets", "reset", "--topic", "loyalty.purchase", "--to-earliest", "--force")
	if code != 1 || !strings.Contains(errs, "broker refused the reset") {
		t.Fatalf("forced reset with a live member: exit %d\n%s%s", code, out, errs)
	}
	stop()

	code, out, errs = s.cli(t, "offsets", "reset", "--topic", "loyalty.purchase", "--to-earliest")
	if code != 0 || !strings.Contains(out, "partition 0: 5 -> 0") || !strings.Contains(out, "partition 1: 5 -> 0") {
		t.Fatalf("reset to earliest: exit %d\n%s%s", code, out, errs)
	}
	if _, lag := committedRow(t, out, 1); lag != 5 {
		t.Errorf("lag after reset to earliest: %d\n%s", lag, out)
	}
	// Partition 0 holds off-0, off-2, ... stamped t0, t0+2m, ...: the
	// first at or after t0+3m is off-4, offset 2.
	code, out, errs = s.cli(t, "offsets", "reset", "--topic", "loyalty.purchase", "--partition", "0",
		"--to-time", t0.Add(3*time.Minute).Format(time.RFC3339))
	if code != 0 || !strings.Contains(out, "partition 0: 0 -> 2") || strings.Contains(out, "partition 1:") {
		t.Fatalf("reset to time: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = s.cli(t, "offsets", "reset", "--topic", "loyalty.purchase", "--partition", "1", "--to-offset", "99")
	if code != 0 || !strings.Contains(out, "partition 1: 0 -> 5") || !strings.Contains(errs, "outside [0, 5]") {
		t.Fatalf("reset past the end: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = s.cli(t, "offsets", "reset", "--topic", "loyalty.purchase", "--to-latest")
	if code != 0 || !strings.Contains(out, "partition 0: 2 -> 5") {
		t.Fatalf("reset to latest: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = s.cli(t, "offsets", "reset", "--topic", "loyalty.purchase", "--partition", "7", "--to-earliest")
	if code != 2 || !strings.Contains(errs, "no partition 7") {
		t.Errorf("missing partition: exit %d\n%s%s", code, out, errs)
	}
}

func TestOffsetsUsageErrors(t *testing.T) {
	s := &replayStack{envs: map[string]string{}}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"offsets", "reset", "--topic", "t"}, "exactly one of --to-time"},
		{[]string{"offsets", "reset", "--to-earliest"}, "one --topic"},
		{[]string{"offsets", "reset", "--topic", "t", "--to-earliest", "--to-latest"}, "exactly one"},
		{[]string{"offsets", "reset", "--topic", "t", "--to-time", "soon"}, "--to-time"},
		{[]string{"offsets", "--to-earliest"}, "go with 'offsets reset'"},
		{[]string{"offsets", "extra"}, "unexpected arguments"},
	} {
		code, _, errs := s.cli(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", tc.args, code, errs, tc.want)
		}
	}
}
