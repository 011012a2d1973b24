package offsets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a cluster with a topic of 2 partitions holding records 0..4
// on each partition, partition p's record i stamped t0 + (2i+p) minutes,
// and an admin client: the real cluster named by realkafka.Seeds, or kfake
// over TCP. The topic and groups are the test's own (groups named by group,
// deleted at the end on a real cluster).
type fixture struct {
	seeds []string
	topic string
	adm   *kadm.Client
}

func cluster(t *testing.T, t0 time.Time) *fixture {
	t.Helper()
	f := &fixture{topic: realkafka.Name(t, "purchase")}
	f.seeds = testkit.StartKafka(t, testkit.KafkaOptions{Real: true, Topics: []testkit.TopicSet{{Partitions: 2, Names: []string{f.topic}}}}).Brokers
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: f.topic, Partition: int32(i % 2), Value: []byte(fmt.Sprint(i)),
			Timestamp: t0.Add(time.Duration(i) * time.Minute)})
	}
	if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	f.adm = kadm.NewClient(cl)
	return f
}

// group names a group of t, deleted at its end on a real cluster.
func (f *fixture) group(t *testing.T, what string) string {
	t.Helper()
	g := realkafka.Name(t, what)
	if realkafka.Seeds() != nil {
		realkafka.DeleteAtEnd(t, f.seeds, nil, g)
	}
	return g
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func commit(t *testing.T, f *fixture, group string, p int32, at int64) {
	t.Helper()
	var o kadm.Offsets
	o.AddOffset(f.topic, p, at, -1)
	resp, err := f.adm.CommitOffsets(ctx(t), group, o)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestLag(t *testing.T) {
	f := cluster(t, time.Now())
	g, h, nobody := f.group(t, "g"), f.group(t, "g"), realkafka.Name(t, "nobody")
	commit(t, f, g, 0, 3)
	r, err := Lag(ctx(t), f.adm, g, []string{f.topic})
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{{f.topic, 0, 3, 5, 2}, {f.topic, 1, -1, 5, 5}}
	if r.Group != g || r.State != "Empty" || len(r.Members) != 0 || fmt.Sprint(r.Rows) != fmt.Sprint(want) {
		t.Fatalf("report %+v, want rows %v", r, want)
	}
	var out bytes.Buffer
	r.Print(&out)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	want2 := []string{"group " + g + ": Empty, 0 members", "TOPIC PARTITION COMMITTED END LAG",
		f.topic + " 0 3 5 2", f.topic + " 1 - 5 5", "total 7"}
	if fmt.Sprint(lines) != fmt.Sprint(want2) {
		t.Errorf("output:\n%s", out.String())
	}

	r, err = Lag(ctx(t), f.adm, nobody, []string{f.topic})
	out.Reset()
	r.Print(&out)
	if err != nil || r.State != "" || !strings.Contains(out.String(), "group "+nobody+": unknown to the cluster") {
		t.Fatalf("unknown group: %v\n%s", err, out.String())
	}

	// Show refuses it, naming the groups there are, the nearest first:
	// g's name mistyped has g, then h (whose name shares g's up to its
	// random end). A real cluster is shared and holds other tests' groups
	// too; the message's form is TestNoGroupError's.
	commit(t, f, h, 1, 1)
	out.Reset()
	typo := g + "x"
	err = Show(ctx(t), f.adm, &out, typo, []string{f.topic})
	var ng *NoGroupError
	if !errors.As(err, &ng) || ng.Group != typo || len(ng.Groups) < 2 || ng.Groups[0] != g || ng.Groups[1] != h || out.Len() != 0 ||
		!strings.HasPrefix(err.Error(), fmt.Sprintf(`no such group %q (never committed, or expired); the cluster has `, typo)) {
		t.Fatalf("Show of an unknown group: %v\n%s", err, out.String())
	}
	if err := Show(ctx(t), f.adm, &out, g, []string{f.topic}); err != nil || !strings.Contains(out.String(), "group "+g+": Empty") {
		t.Fatalf("Show: %v\n%s", err, out.String())
	}
}

func TestNoGroupErrorNamesTheNearestFirst(t *testing.T) {
	got := nearestFirst("loyalty-bridge-eu", []string{"audit", "loyalty-bridge", "loyalty-bridge-us", "loyalty-bridge-eu1", "billing", "lo"})
	if want := []string{"loyalty-bridge-eu1", "loyalty-bridge-us", "loyalty-bridge", "lo", "audit", "billing"}; !slices.Equal(got, want) {
		t.Errorf("nearestFirst: %v, want %v", got, want)
	}
}

func TestNoGroupError(t *testing.T) {
	var many []string
	for i := range maxGroupsNamed + 2 {
		many = append(many, fmt.Sprintf("g%02d", i))
	}
	for _, tc := range []struct {
		groups []string
		want   string
	}{
		{nil, `no such group "nobody" (never committed, or expired); the cluster has no consumer groups`},
		{[]string{"g"}, `no such group "nobody" (never committed, or expired); the cluster has 1 group: g`},
		{[]string{"g", "h"}, `no such group "nobody" (never committed, or expired); the cluster has 2 groups: g, h`},
		{many, `no such group "nobody" (never committed, or expired); the cluster has 22 groups: ` +
			strings.Join(many[:maxGroupsNamed], ", ") + " and 2 more"},
	} {
		if got := (&NoGroupError{Group: "nobody", Groups: tc.groups}).Error(); got != tc.want {
			t.Errorf("%d groups: %s\nwant %s", len(tc.groups), got, tc.want)
		}
	}
}

func TestReset(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Minute)
	f := cluster(t, t0)
	g := f.group(t, "g")
	commit(t, f, g, 0, 5)
	for _, tc := range []struct {
		name      string
		partition int32
		to        Target
		want      []Move
	}{
		{"earliest", -1, ToEarliest(), []Move{{0, 5, 0, false, 0, 5}, {1, -1, 0, false, 0, 5}}},
		// Partition 0 holds records stamped t0, t0+2m, …: the first at
		// or after t0+3m is its offset 2.
		{"time", 0, ToTime(t0.Add(3 * time.Minute)), []Move{{0, 0, 2, false, 0, 5}}},
		{"time past the end", 1, ToTime(t0.Add(time.Hour)), []Move{{1, 0, 5, false, 0, 5}}},
		{"offset", 1, ToOffset(3), []Move{{1, 5, 3, false, 0, 5}}},
		{"offset past the end", 1, ToOffset(99), []Move{{1, 3, 5, true, 0, 5}}},
		{"latest", -1, ToLatest(), []Move{{0, 2, 5, false, 0, 5}, {1, 5, 5, false, 0, 5}}},
	} {
		got, err := Reset(ctx(t), f.adm, g, f.topic, tc.partition, tc.to)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
		r, err := Lag(ctx(t), f.adm, g, []string{f.topic})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tc.want {
			if c := r.Rows[m.Partition].Committed; c != m.To {
				t.Errorf("%s: partition %d committed %d after the reset, want %d", tc.name, m.Partition, c, m.To)
			}
		}
	}
	// A group that never committed can be positioned before it starts.
	if got, err := Reset(ctx(t), f.adm, f.group(t, "new"), f.topic, 1, ToOffset(2)); err != nil ||
		fmt.Sprint(got) != fmt.Sprint([]Move{{1, -1, 2, false, 0, 5}}) {
		t.Fatalf("reset of a new group: %v, %v", got, err)
	}
	var out bytes.Buffer
	PrintMoves(&out, "g", "loyalty.purchase", []Move{{0, -1, 3, false, 0, 5}, {1, 4, 0, false, 0, 5}})
	if want := "group g: loyalty.purchase reset\n  partition 0: - -> 3\n  partition 1: 4 -> 0\n"; out.String() != want {
		t.Errorf("PrintMoves:\n%s", out.String())
	}
	_, err := Reset(ctx(t), f.adm, g, f.topic, 7, ToEarliest())
	var np *NoPartitionError
	if !errors.As(err, &np) || err.Error() != "topic "+f.topic+" has no partition 7" {
		t.Fatalf("missing partition: %v", err)
	}
}

// A group with a live member is not idle, and the broker refuses a reset
// from outside it.
func TestLiveMember(t *testing.T) {
	f := cluster(t, time.Now())
	g := f.group(t, "g")
	member, err := kgo.NewClient(kgo.SeedBrokers(f.seeds...), kgo.ConsumerGroup(g), kgo.ConsumeTopics(f.topic),
		kgo.ClientID("bridge-1"))
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan struct{})
	go func() { // the member joins when it polls, and polls until closed
		defer close(polled)
		for !member.PollFetches(context.Background()).IsClientClosed() {
		}
	}()
	defer func() { member.Close(); <-polled }()

	deadline := time.Now().Add(20 * time.Second)
	for {
		err = Idle(ctx(t), f.adm, g)
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	var live *LiveMembersError
	if !errors.As(err, &live) || len(live.Members) != 1 || !strings.HasPrefix(live.Members[0], "bridge-1@") ||
		!strings.HasPrefix(err.Error(), "group "+g+" has 1 live member (bridge-1@") {
		t.Fatalf("Idle with a member: %v", err)
	}
	if _, err := Reset(ctx(t), f.adm, g, f.topic, -1, ToEarliest()); err == nil ||
		!strings.Contains(err.Error(), "the broker refused the reset: group "+g+" is not empty") {
		t.Fatalf("reset of a live group: %v", err)
	}
	if err := Idle(ctx(t), f.adm, realkafka.Name(t, "nobody")); err != nil {
		t.Fatalf("Idle of an unknown group: %v", err)
	}
}
