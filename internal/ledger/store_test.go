package ledger

import (
	"errors"
	"testing"
)

// A checkpoint reads back as written, a next offset of 0 (a partition
// read while empty) included; a negative next offset, another version or
// another length does not read, and the store is read again from the
// topic.
func TestCheckpointRoundTrip(t *testing.T) {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, c := range []checkpoint{{}, {next: 0, firstAt: 1_795_000_000_123, topicID: id}, {next: 1 << 40, firstAt: -1}} {
		got, err := decodeCheckpoint(c.encode())
		if err != nil || got != c {
			t.Errorf("%+v read back as %+v, %v", c, got, err)
		}
	}
	long := append(checkpoint{next: 5}.encode(), 0)
	other := checkpoint{next: 5}.encode()
	other[0] = checkpointVersion + 1
	for name, b := range map[string][]byte{
		"negative next":   checkpoint{next: -1}.encode(),
		"another version": other,
		"a byte too many": long,
		"a byte short":    checkpoint{next: 5}.encode()[:32],
	} {
		if c, err := decodeCheckpoint(b); !errors.Is(err, errBadCheckpoint) {
			t.Errorf("%s: read as %+v, %v; want errBadCheckpoint", name, c, err)
		}
	}
}
