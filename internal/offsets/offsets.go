package offsets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Report is a group's state and, per partition, its committed offset, the
// partition's end and the lag.
type Report struct {
	Group string
	// State is the broker's group state ("Stable", "Empty", …); "" when
	// the cluster does not know the group (never committed, or expired).
	State   string
	Members []string // clientId@host, sorted
	Rows    []Row    // by topic, then partition
}

// Row is one partition of a Report.
type Row struct {
	Topic     string
	Partition int32
	Committed int64 // -1: nothing committed
	End       int64
	Lag       int64 // End when nothing is committed
}

// Lag describes group and its position on every partition of topics.
func Lag(ctx context.Context, adm *kadm.Client, group string, topics []string) (Report, error) {
	g, err := describe(ctx, adm, group)
	if err != nil {
		return Report{}, err
	}
	committed, err := fetchCommitted(ctx, adm, group, topics...)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return Report{}, fmt.Errorf("committed offsets of %s: %w", group, err)
	}
	ends, err := listed(adm.ListEndOffsets(ctx, topics...))
	if err != nil {
		return Report{}, fmt.Errorf("end offsets: %w", err)
	}
	r := Report{Group: group, State: g.State, Members: members(g.Members)}
	if r.State == "Dead" {
		r.State = ""
	}
	ends.Each(func(l kadm.ListedOffset) {
		row := Row{Topic: l.Topic, Partition: l.Partition, Committed: -1, End: l.Offset, Lag: l.Offset}
		if c, ok := committed.Lookup(l.Topic, l.Partition); ok && c.Err == nil && c.At >= 0 {
			row.Committed, row.Lag = c.At, max(0, l.Offset-c.At)
		}
		r.Rows = append(r.Rows, row)
	})
	slices.SortFunc(r.Rows, func(a, b Row) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
	return r, nil
}

// Show writes group's Lag report on topics to w. A group the cluster does
// not know (never committed, or expired) is a *NoGroupError naming the
// groups it knows, those nearest to group first: most likely --group was
// mistyped, and a shared cluster has more groups than an error can name.
func Show(ctx context.Context, adm *kadm.Client, w io.Writer, group string, topics []string) error {
	r, err := Lag(ctx, adm, group, topics)
	if err != nil {
		return err
	}
	if r.State == "" {
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			return fmt.Errorf("no such group %q, and listing the groups failed: %w", group, err)
		}
		return &NoGroupError{Group: group, Groups: nearestFirst(group, listed.Groups())}
	}
	r.Print(w)
	return nil
}

// NoGroupError says that the cluster does not know a group, and which
// groups it knows.
type NoGroupError struct {
	Group  string
	Groups []string // those sharing the longest prefix with Group first, then by name
}

// nearestFirst sorts groups by the length of the prefix each shares with
// asked, longest first, then by name: a mistyped name's neighbours lead.
func nearestFirst(asked string, groups []string) []string {
	shared := func(g string) int {
		n := 0
		for n < len(g) && n < len(asked) && g[n] == asked[n] {
			n++
		}
		return n
	}
	slices.SortFunc(groups, func(a, b string) int {
		if c := shared(b) - shared(a); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return groups
}

// maxGroupsNamed bounds the groups a NoGroupError lists.
const maxGroupsNamed = 20

func (e *NoGroupError) Error() string {
	s := fmt.Sprintf("no such group %q (never committed, or expired)", e.Group)
	switch n := len(e.Groups); {
	case n == 0:
		return s + "; the cluster has no consumer groups"
	case n > maxGroupsNamed:
		return fmt.Sprintf("%s; the cluster has %d groups: %s and %d more", s, n, strings.Join(e.Groups[:maxGroupsNamed], ", "), n-maxGroupsNamed)
	}
	return fmt.Sprintf("%s; the cluster has %s: %s", s, plural(len(e.Groups), "group"), strings.Join(e.Groups, ", "))
}

// Print writes the report as a table with a total.
func (r Report) Print(w io.Writer) {
	state := r.State
	if state == "" {
		state = "unknown to the cluster (never committed, or expired)"
	}
	fmt.Fprintf(w, "group %s: %s, %s", r.Group, state, plural(len(r.Members), "member"))
	if len(r.Members) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(r.Members, ", "))
	}
	fmt.Fprintln(w)
	width := len("TOPIC")
	for _, row := range r.Rows {
		width = max(width, len(row.Topic))
	}
	fmt.Fprintf(w, "%-*s  %9s  %12s  %12s  %10s\n", width, "TOPIC", "PARTITION", "COMMITTED", "END", "LAG")
	var total int64
	for _, row := range r.Rows {
		c := "-"
		if row.Committed >= 0 {
			c = fmt.Sprint(row.Committed)
		}
		fmt.Fprintf(w, "%-*s  %9d  %12s  %12d  %10d\n", width, row.Topic, row.Partition, c, row.End, row.Lag)
		total += row.Lag
	}
	fmt.Fprintf(w, "%-*s  %9s  %12s  %12s  %10d\n", width, "total", "", "", "", total)
}

// LiveMembersError says that a group has members: a reset would be
// overwritten by their next commits.
type LiveMembersError struct {
	Group   string
	Members []string // clientId@host, sorted
}

func (e *LiveMembersError) Error() string {
	return fmt.Sprintf("group %s has %s (%s)", e.Group, plural(len(e.Members), "live member"), strings.Join(e.Members, ", "))
}

// Idle returns a *LiveMembersError when group has members, nil when it has
// none or the cluster does not know it.
func Idle(ctx context.Context, adm *kadm.Client, group string) error {
	g, err := describe(ctx, adm, group)
	if err != nil {
		return err
	}
	if len(g.Members) > 0 {
		return &LiveMembersError{Group: group, Members: members(g.Members)}
	}
	return nil
}

// Target is where Reset moves the commits: build it with ToTime, ToOffset,
// ToEarliest or ToLatest. The zero Target is ToLatest.
type Target struct {
	kind   targetKind
	at     time.Time
	offset int64
}

type targetKind int

const (
	latest targetKind = iota
	earliest
	atTime
	atOffset
)

// ToTime is the first offset at or after t (the end when there is none).
func ToTime(t time.Time) Target { return Target{kind: atTime, at: t} }

// ToOffset is offset n, kept within each partition's log start and end.
func ToOffset(n int64) Target { return Target{kind: atOffset, offset: n} }

// ToEarliest is the log start.
func ToEarliest() Target { return Target{kind: earliest} }

// ToLatest is the end: everything not yet processed is skipped.
func ToLatest() Target { return Target{kind: latest} }

// Move is one partition's reset.
type Move struct {
	Partition int32
	From      int64 // -1: nothing was committed
	To        int64
	// Clamped is set when a ToOffset target lay outside [Start, End] and
	// To is the nearer bound.
	Clamped    bool
	Start, End int64
}

// NoPartitionError says that the topic has no such partition.
type NoPartitionError struct {
	Topic     string
	Partition int32
}

func (e *NoPartitionError) Error() string {
	return fmt.Sprintf("topic %s has no partition %d", e.Topic, e.Partition)
}

// Reset commits to for group on every partition of topic, or only on
// partition when it is ≥ 0, and returns the moves by partition. It does not
// look for members (see Idle); the broker itself refuses a commit from
// outside a group that is not empty, and the error says so.
func Reset(ctx context.Context, adm *kadm.Client, group, topic string, partition int32, to Target) ([]Move, error) {
	starts, err := listed(adm.ListStartOffsets(ctx, topic))
	if err != nil {
		return nil, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	ends, err := listed(adm.ListEndOffsets(ctx, topic))
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	target := ends
	switch to.kind {
	case atTime:
		if target, err = listed(adm.ListOffsetsAfterMilli(ctx, to.at.UnixMilli(), topic)); err != nil {
			return nil, fmt.Errorf("offsets of %s at %s: %w", topic, to.at.Format(time.RFC3339), err)
		}
	case earliest:
		target = starts
	}
	before, err := fetchCommitted(ctx, adm, group, topic)
	if err != nil {
		return nil, fmt.Errorf("committed offsets of %s: %w", group, err)
	}
	commit := kadm.Offsets{}
	var moves []Move
	target.Each(func(l kadm.ListedOffset) {
		if partition >= 0 && l.Partition != partition {
			return
		}
		s, _ := starts.Lookup(topic, l.Partition)
		e, _ := ends.Lookup(topic, l.Partition)
		m := Move{Partition: l.Partition, From: -1, To: l.Offset, Start: s.Offset, End: e.Offset}
		if to.kind == atOffset {
			m.To = min(max(to.offset, s.Offset), e.Offset)
			m.Clamped = m.To != to.offset
		}
		if c, ok := before.Lookup(topic, l.Partition); ok && c.Err == nil && c.At >= 0 {
			m.From = c.At
		}
		moves = append(moves, m)
		commit.Add(kadm.Offset{Topic: topic, Partition: l.Partition, At: m.To, LeaderEpoch: -1})
	})
	if len(moves) == 0 {
		return nil, &NoPartitionError{Topic: topic, Partition: partition}
	}
	slices.SortFunc(moves, func(a, b Move) int { return int(a.Partition - b.Partition) })
	resp, err := adm.CommitOffsets(ctx, group, commit)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) {
			return nil, fmt.Errorf("the broker refused the reset: group %s is not empty (%w); stop its members, or wait for crashed ones to expire (session timeout)", group, err)
		}
		return nil, fmt.Errorf("commit: %w", err)
	}
	return moves, nil
}

// PrintMoves writes what a Reset of group's topic did, a line per
// partition.
func PrintMoves(w io.Writer, group, topic string, moves []Move) {
	fmt.Fprintf(w, "group %s: %s reset\n", group, topic)
	for _, m := range moves {
		was := "-"
		if m.From >= 0 {
			was = fmt.Sprint(m.From)
		}
		fmt.Fprintf(w, "  partition %d: %s -> %d\n", m.Partition, was, m.To)
	}
}

// fetchCommitted is the group's committed offsets on topics; a group the
// cluster does not know has none (some brokers answer GROUP_ID_NOT_FOUND
// rather than an empty list).
func fetchCommitted(ctx context.Context, adm *kadm.Client, group string, topics ...string) (kadm.OffsetResponses, error) {
	committed, err := adm.FetchOffsetsForTopics(ctx, group, topics...)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil, nil
	}
	return committed, err
}

// listed passes on a listing's first partition error as its error.
func listed(l kadm.ListedOffsets, err error) (kadm.ListedOffsets, error) {
	if err == nil {
		err = l.Error()
	}
	return l, err
}

func describe(ctx context.Context, adm *kadm.Client, group string) (kadm.DescribedGroup, error) {
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return kadm.DescribedGroup{}, fmt.Errorf("describe group %s: %w", group, err)
	}
	g := gs[group]
	if g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
		return g, fmt.Errorf("describe group %s: %w", group, g.Err)
	}
	return g, nil
}

func members(ms []kadm.DescribedGroupMember) []string {
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, m.ClientID+"@"+strings.TrimPrefix(m.ClientHost, "/"))
	}
	slices.Sort(names)
	return names
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
