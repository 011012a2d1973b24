package pipeline

import "fmt"

// Delivery is the guarantee the pipeline gives for its outputs. The zero
// value is AtLeastOnce.
type Delivery uint8

const (
	// AtLeastOnce produces outputs as soon as handlers return and commits an
	// input offset once every output before it is acknowledged. A member
	// that stops without committing leaves records that its successor
	// processes again, so an output may appear more than once. It is the
	// default.
	AtLeastOnce Delivery = iota
	// ExactlyOnce processes records in rounds and writes each round's
	// outputs and input offsets in one Kafka transaction (franz-go's
	// GroupTransactSession): a reader with isolation level read_committed
	// sees every output once. It needs Options.TransactionalID. See the
	// package documentation for its cost.
	ExactlyOnce
)

// String returns the delivery's configuration name: at-least-once or
// exactly-once.
func (d Delivery) String() string {
	switch d {
	case AtLeastOnce:
		return "at-least-once"
	case ExactlyOnce:
		return "exactly-once"
	}
	return fmt.Sprintf("Delivery(%d)", uint8(d))
}

// strategy returns the mode that gives the delivery's guarantee.
func (d Delivery) strategy(p *Pipeline) strategy {
	if d == ExactlyOnce {
		return newExactlyOnce(p)
	}
	return newAtLeastOnce(p)
}

// ParseDelivery parses a configuration name as returned by Delivery.String.
func ParseDelivery(s string) (Delivery, error) {
	switch s {
	case "at-least-once":
		return AtLeastOnce, nil
	case "exactly-once":
		return ExactlyOnce, nil
	}
	return 0, fmt.Errorf("pipeline: unknown delivery %q (want at-least-once or exactly-once)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (d Delivery) MarshalText() ([]byte, error) {
	if d > ExactlyOnce {
		return nil, fmt.Errorf("pipeline: invalid delivery %d", uint8(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler, so a Delivery can be
// bound to a flag or a configuration field directly.
func (d *Delivery) UnmarshalText(b []byte) error {
	v, err := ParseDelivery(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
