package ordering

import "fmt"

// Mode is an ordering guarantee within one partition. The zero value is Key.
type Mode uint8

const (
	// Key runs records with the same key one at a time in offset order and
	// records with different keys concurrently. It is the default.
	Key Mode = iota
	// Partition runs the records of a partition one at a time in offset
	// order.
	Partition
	// Unordered runs any record as soon as there is room; only the commit
	// point stays contiguous.
	Unordered
)

// String returns the mode's configuration name: key, partition or unordered.
func (m Mode) String() string {
	switch m {
	case Key:
		return "key"
	case Partition:
		return "partition"
	case Unordered:
		return "unordered"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode parses a configuration name as returned by Mode.String.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "key":
		return Key, nil
	case "partition":
		return Partition, nil
	case "unordered":
		return Unordered, nil
	}
	return 0, fmt.Errorf("ordering: unknown mode %q (want key, partition or unordered)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (m Mode) MarshalText() ([]byte, error) {
	if m > Unordered {
		return nil, fmt.Errorf("ordering: invalid mode %d", uint8(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler, so a Mode can be bound
// to a flag or a configuration field directly.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}
