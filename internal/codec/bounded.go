package codec

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
)

// Arrays and maps are where a few bytes can cost unbounded work: a block
// header declares how many items follow, and hamba/avro skips the items of
// a writer field the reader does not have in a loop that goes on after the
// value has ended (2^40 declared items in a 20-byte value kept it busy for
// hours). The bridge's own schemas have no arrays or maps, but an upstream
// writer may add one in a compatible evolution, and then one corrupt record
// would stall its partition. So a writer schema with arrays or maps is
// checked once (checkBounded: no items that take no bytes) and each of its
// values is scanned before decoding (scanBounded: no block declares more
// items than bytes remain), which bounds the decoder's work by the value's
// size.

// checkBounded refuses a writer schema with an array or map whose items
// take no bytes (null, fixed(0), records of those): their count could not
// be bounded by the value's size.
func checkBounded(w avro.Schema) error {
	seen := map[avro.Schema]bool{}
	var walk func(s avro.Schema) error
	walk = func(s avro.Schema) error {
		s = deref(s)
		if seen[s] {
			return nil
		}
		seen[s] = true
		switch s := s.(type) {
		case *avro.RecordSchema:
			for _, f := range s.Fields() {
				if err := walk(f.Type()); err != nil {
					return err
				}
			}
		case *avro.UnionSchema:
			for _, t := range s.Types() {
				if err := walk(t); err != nil {
					return err
				}
			}
		case *avro.MapSchema:
			return walk(s.Values()) // an entry has a key: at least a byte
		case *avro.ArraySchema:
			if zeroWidth(s.Items(), map[avro.Schema]bool{}) {
				return errors.New("an array of items that take no bytes (null, fixed(0) or records of those): refused, since a few bytes could declare billions of them")
			}
			return walk(s.Items())
		}
		return nil
	}
	return walk(w)
}

func deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// zeroWidth reports whether every value of s encodes to no bytes.
func zeroWidth(s avro.Schema, seen map[avro.Schema]bool) bool {
	switch s := deref(s).(type) {
	case *avro.NullSchema:
		return true
	case *avro.FixedSchema:
		return s.Size() == 0
	case *avro.RecordSchema:
		if seen[s] { // a record inside itself, not through a union or array: not writable anyway
			return false
		}
		seen[s] = true
		for _, f := range s.Fields() {
			if !zeroWidth(f.Type(), seen) {
				return false
			}
		}
		return true
	}
	return false
}

// hasBlocks reports whether s has an array or map anywhere.
func hasBlocks(s avro.Schema) bool {
	seen := map[avro.Schema]bool{}
	var walk func(s avro.Schema) bool
	walk = func(s avro.Schema) bool {
		s = deref(s)
		if seen[s] {
			return false
		}
		seen[s] = true
		switch s := s.(type) {
		case *avro.ArraySchema, *avro.MapSchema:
			return true
		case *avro.RecordSchema:
			for _, f := range s.Fields() {
				if walk(f.Type()) {
					return true
				}
			}
		case *avro.UnionSchema:
			for _, t := range s.Types() {
				if walk(t) {
					return true
				}
			}
		}
		return false
	}
	return walk(s)
}

var errShort = errors.New("value ends inside the writer schema")

// scanBounded walks value as an Avro encoding of w without decoding it,
// refusing a block that declares more items than bytes remain (with
// checkBounded, every item takes a byte at least, so the walk is linear in
// the value's size) or a block size other than its items' (the decoder
// skips by the size, and must land where this walk did).
func scanBounded(w avro.Schema, value []byte) error {
	s := scanner{b: value}
	return s.value(w, 0)
}

type scanner struct {
	b []byte
	i int
}

// maxScanDepth bounds recursion through recursive writer schemas.
const maxScanDepth = 64

func (s *scanner) long() (int64, error) {
	v, n := binary.Varint(s.b[s.i:]) // Avro longs are zig-zag varints
	if n <= 0 {
		return 0, errShort
	}
	s.i += n
	return v, nil
}

func (s *scanner) skip(n int64) error {
	if n < 0 || n > int64(len(s.b)-s.i) {
		return errShort
	}
	s.i += int(n)
	return nil
}

func (s *scanner) value(sc avro.Schema, depth int) error {
	if depth > maxScanDepth {
		return fmt.Errorf("nested deeper than %d", maxScanDepth)
	}
	switch t := deref(sc).(type) {
	case *avro.NullSchema:
		return nil
	case *avro.PrimitiveSchema:
		switch t.Type() {
		case avro.Boolean:
			return s.skip(1)
		case avro.Int, avro.Long:
			_, err := s.long()
			return err
		case avro.Float:
			return s.skip(4)
		case avro.Double:
			return s.skip(8)
		case avro.String, avro.Bytes:
			n, err := s.long()
			if err != nil {
				return err
			}
			return s.skip(n)
		}
	case *avro.FixedSchema:
		return s.skip(int64(t.Size()))
	case *avro.EnumSchema:
		_, err := s.long()
		return err
	case *avro.UnionSchema:
		idx, err := s.long()
		if err != nil {
			return err
		}
		types := t.Types()
		if idx < 0 || idx >= int64(len(types)) {
			return fmt.Errorf("union index %d out of range", idx)
		}
		return s.value(types[idx], depth+1)
	case *avro.RecordSchema:
		for _, f := range t.Fields() {
			if err := s.value(f.Type(), depth+1); err != nil {
				return err
			}
		}
		return nil
	case *avro.ArraySchema:
		return s.blocks(func() error { return s.value(t.Items(), depth+1) })
	case *avro.MapSchema:
		return s.blocks(func() error {
			n, err := s.long()
			if err != nil {
				return err
			}
			if err := s.skip(n); err != nil {
				return err
			}
			return s.value(t.Values(), depth+1)
		})
	}
	return fmt.Errorf("writer schema type %s not scanned", sc.Type())
}

// blocks walks the blocks of an array or map.
func (s *scanner) blocks(item func() error) error {
	for {
		l, err := s.long()
		if err != nil {
			return err
		}
		if l == 0 {
			return nil
		}
		var size int64
		if l < 0 { // a count with the block's size in bytes
			if l = -l; l < 0 {
				return errors.New("block count out of range")
			}
			if size, err = s.long(); err != nil {
				return err
			}
			if size < 0 || size > int64(len(s.b)-s.i) {
				return errors.New("block size beyond the value")
			}
		}
		if l > int64(len(s.b)-s.i) {
			return fmt.Errorf("a block declares %d items with %d bytes left", l, len(s.b)-s.i)
		}
		start := s.i
		for range l {
			if err := item(); err != nil {
				return err
			}
		}
		// hamba/avro skips a block by its size when it has one, without
		// reading its items: a size other than the items' would have it
		// read the next block header where this walk did not, and that
		// header was never checked (a 60-byte value had it skip items at
		// the value's end for 4.6 s).
		if size > 0 && int64(s.i-start) != size {
			return fmt.Errorf("a block of %d bytes holds %d bytes of items", size, s.i-start)
		}
	}
}
