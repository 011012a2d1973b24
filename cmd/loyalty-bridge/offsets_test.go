package main

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// The offsets command end to end: what it prints, what it refuses and its
// exit codes. Package offsets tests the positions themselves.
func TestOffsetsShowAndReset(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	topic, group := s.topics.Purchase, s.group
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.st.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	var committed kadm.Offsets
	for p := range int32(2) {
		for range 5 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("x")})
		}
		committed.AddOffset(topic, p, 5, -1)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(cl).CommitOffsets(ctx, group, committed); err != nil {
		t.Fatal(err)
	}

	code, out, errs := s.cli(t, "offsets", "--topic", topic)
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(topic) + ` +1 +5 +5 +0$`)
	if code != 0 || !strings.Contains(out, "group "+group+": Empty, 0 members") || !row.MatchString(out) || !strings.Contains(out, "total") {
		t.Fatalf("offsets: exit %d\n%s%s", code, out, errs)
	}
	if code, out, _ = s.cli(t, "offsets"); code != 0 || !strings.Contains(out, s.topics.MemberOnboarding+" ") {
		t.Errorf("offsets of every input: exit %d\n%s", code, out)
	}
	// A mistyped group: the groups nearest to it are named first (a real
	// cluster is shared, and holds other tests' groups too).
	code, out, errs = s.cli(t, "offsets", "--group", group+"x")
	if code != 2 || out != "" || !regexp.MustCompile(`loyalty-bridge offsets: no such group "`+regexp.QuoteMeta(group+"x")+
		`" \(never committed, or expired\); the cluster has \d+ groups?: `+regexp.QuoteMeta(group)+`(,|\n)`).MatchString(errs) {
		t.Errorf("an unknown group: exit %d\n%s%s", code, out, errs)
	}

	// A live member: reset refuses; --force is refused by Kafka itself.
	member, err := kgo.NewClient(kgo.SeedBrokers(s.st.Brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan struct{})
	go func() { // the member joins when it polls, and polls until closed
		defer close(polled)
		for !member.PollFetches(context.Background()).IsClientClosed() {
		}
	}()
	leave := sync.OnceFunc(func() { member.Close(); <-polled })
	t.Cleanup(leave)
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, errs = s.cli(t, "offsets", "--topic", topic)
		if strings.Contains(out, "Stable, 1 member (") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // poll interval: until the member has joined
	}
	if code != 0 || !strings.Contains(out, "group "+group+": Stable, 1 member (") {
		t.Fatalf("offsets with a member: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = s.cli(t, "offsets", "reset", "--topic", topic, "--to-earliest")
	if code != 1 || !strings.Contains(errs, "1 live member (") || !strings.Contains(errs, "stop them first; --force skips this check") {
		t.Fatalf("reset with a live member: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = s.cli(t, "offsets", "reset", "--topic", topic, "--to-earliest", "--force")
	if code != 1 || !strings.Contains(errs, "warning: group "+group+" has 1 live member (") || !strings.Contains(errs, "broker refused the reset") {
		t.Fatalf("forced reset with a live member: exit %d\n%s%s", code, out, errs)
	}
	leave()

	code, out, errs = s.cli(t, "offsets", "reset", "--topic", topic, "--partition", "1", "--to-offset", "99")
	if code != 0 || !strings.Contains(out, "group "+group+": "+topic+" reset\n  partition 1: ") ||
		!strings.Contains(errs, "partition 1: --to-offset 99 is outside [0, 5]: 5") || !strings.Contains(out, "TOPIC") {
		t.Fatalf("reset past the end: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = s.cli(t, "offsets", "reset", "--topic", topic, "--to-earliest")
	if code != 0 || !strings.Contains(out, "partition 0: 5 -> 0") || !strings.Contains(out, "partition 1: 5 -> 0") {
		t.Fatalf("reset to earliest: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = s.cli(t, "offsets", "reset", "--topic", topic, "--partition", "7", "--to-earliest")
	if code != 2 || !strings.Contains(errs, "no partition 7") {
		t.Errorf("missing partition: exit %d\n%s%s", code, out, errs)
	}
}

func TestOffsetsUsageErrors(t *testing.T) {
	s := eventsStack{}
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
		code, _, errs := s.cli(t, "", tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", tc.args, code, errs, tc.want)
		}
	}
}
