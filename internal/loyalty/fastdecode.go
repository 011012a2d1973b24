package loyalty

import "encoding/json"

// The success envelope of the hot path's answers (accrual, redemption,
// lookup) is read here without reflection when it has the spec's exact
// shape; everything else goes to encoding/json as before.
//
// Why: a CPU profile of loyalty-bench (50,000 accruals, default scenario)
// showed encoding/json.Unmarshal at 4.4% of the bridge's CPU, its
// literalStore the largest allocation site (4% of all objects) and
// reflect.unsafe_New another 1.8%, all for a body of six short fields.
// With this path, decodeData fell from 5.0% to 1.4% of the same profile,
// and encoding/json.Unmarshal left it.
//
// Why it is exact: fastDecode says ok only for what it reads completely:
// one object; keys byte for byte as the spec writes them (encoding/json
// would also match them case-insensitively, and keep the last of
// duplicates: any other key, and any duplicate, declines); strings of
// ASCII without escapes or control characters (so unquoting is the
// identity and no invalid UTF-8 is replaced); numbers by the JSON
// grammar, kept as their text as json.Number keeps them; null where
// encoding/json would leave the field as it is; nothing after the value
// but white space. On anything else it declines and the caller runs
// encoding/json unchanged, whose result and errors are then the only
// ones. FuzzFastDecode checks, on every input, that an ok result
// deep-equals encoding/json's, and that the simulator's answers are taken
// by the fast path.

// fastWire is a wire type the fast path fills: accrualWire,
// redemptionWire and transactionWire.
type fastWire interface {
	// fastField is the field the spec names key (compared byte for byte),
	// the zero fastField when there is none.
	fastField(key []byte) fastField
}

// fastField is one field of a fastWire: its own bit (to spot
// duplicates), where its text goes, and whether it is a JSON number
// (json.Number) rather than a string.
type fastField struct {
	bit    uint32
	to     *string
	number bool
}

// fastDecode reads body into env when it is the exact common shape (see
// above); ok false means it did not, and env is left untouched.
func fastDecode[T any](body []byte, env *envelope[T]) (ok bool) {
	if _, isWire := any((*T)(nil)).(fastWire); !isWire {
		return false
	}
	// One copy of the body backs every string of the result: one
	// allocation instead of one a field.
	s := fastScanner{b: body, text: string(body)}
	var out envelope[T]
	const (
		seenStatus = 1 << iota
		seenMessage
		seenData
		seenErrors
	)
	var seen uint32
	ok = s.object(func(key []byte) bool {
		var bit uint32
		switch string(key) {
		case "statusCode":
			bit = seenStatus
		case "message":
			bit = seenMessage
		case "data":
			bit = seenData
		case "errors":
			bit = seenErrors
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		switch bit {
		case seenStatus:
			if s.null() {
				return true
			}
			n, ok := s.smallInt()
			out.StatusCode = n
			return ok
		case seenMessage:
			if s.null() {
				return true
			}
			v, ok := s.plainString()
			out.Message = v
			return ok
		case seenErrors:
			// Only a null errors is the success envelope's; anything else
			// is read by encoding/json (businessError).
			if !s.null() {
				return false
			}
			out.Errors = json.RawMessage("null")
			return true
		}
		if s.null() {
			return true
		}
		data := new(T)
		out.Data = data
		return s.wireObject(any(data).(fastWire))
	})
	if !ok || !s.end() {
		return false
	}
	*env = out
	return true
}

// fastScanner reads JSON of the exact common shape; every method returns
// false on anything else, and a scanner that said false is dropped.
type fastScanner struct {
	b    []byte
	text string // b as a string, which the values are cut from
	i    int
}

func (s *fastScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end reports whether only white space is left.
func (s *fastScanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// object reads an object, calling member after each key and its colon to
// read the value; member returns false to decline.
func (s *fastScanner) object(member func(key []byte) bool) bool {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.space()
		key, ok := s.plainKey()
		if !ok {
			return false
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if !member(key) {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// wireObject reads the data object into w, each of its keys once.
func (s *fastScanner) wireObject(w fastWire) bool {
	var seen uint32
	return s.object(func(key []byte) bool {
		f := w.fastField(key)
		if f.to == nil || seen&f.bit != 0 {
			return false
		}
		seen |= f.bit
		switch {
		case s.null():
			// encoding/json leaves the field as it is: "" here, which the
			// checks of numbers.go read as absent.
			return true
		case f.number:
			v, ok := s.number()
			*f.to = v
			return ok
		default:
			v, ok := s.plainString()
			*f.to = v
			return ok
		}
	})
}

// null reads the literal null.
func (s *fastScanner) null() bool {
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// plainKey reads a string of ASCII without a backslash or a control
// character and returns its content, which is then also its value.
func (s *fastScanner) plainKey() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// plainString is plainKey's value as a string.
func (s *fastScanner) plainString() (string, bool) {
	start := s.i
	if _, ok := s.plainKey(); !ok {
		return "", false
	}
	return s.text[start+1 : s.i-1], true
}

// number reads a number by the JSON grammar,
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and returns its text.
func (s *fastScanner) number() (string, bool) {
	b, i := s.b, s.i
	digits := func() bool {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		digits()
	default:
		return "", false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return "", false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return "", false
		}
	}
	v := s.text[s.i:i]
	s.i = i
	return v, true
}

// smallInt reads a number written as 0 or up to nine digits without a
// leading zero, which encoding/json would read into an int the same way.
func (s *fastScanner) smallInt() (int, bool) {
	start := s.i
	v, ok := s.number()
	if !ok || len(v) > 9 || (len(v) > 1 && v[0] == '0') {
		s.i = start
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			s.i = start
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func (w *accrualWire) fastField(key []byte) fastField {
	switch string(key) {
	case "sponsorId":
		return fastField{1 << 0, (*string)(&w.SponsorID), true}
	case "transactionId":
		return fastField{1 << 1, &w.TransactionID, false}
	case "bitReference":
		return fastField{1 << 2, &w.BitReference, false}
	case "loyaltyId":
		return fastField{1 << 3, &w.LoyaltyID, false}
	case "timestamp":
		return fastField{1 << 4, &w.Timestamp, false}
	case "requestId":
		return fastField{1 << 5, &w.RequestID, false}
	}
	return fastField{}
}

func (w *redemptionWire) fastField(key []byte) fastField {
	switch string(key) {
	case "requestId":
		return fastField{1 << 0, &w.RequestID, false}
	case "transactionId":
		return fastField{1 << 1, &w.TransactionID, false}
	case "bitReference":
		return fastField{1 << 2, &w.BitReference, false}
	case "usedPoint":
		return fastField{1 << 3, (*string)(&w.UsedPoint), true}
	case "timestamp":
		return fastField{1 << 4, &w.Timestamp, false}
	}
	return fastField{}
}

func (w *transactionWire) fastField(key []byte) fastField {
	switch string(key) {
	case "transactionPoint":
		return fastField{1 << 0, (*string)(&w.TransactionPoint), true}
	case "transactionAmount":
		return fastField{1 << 1, (*string)(&w.TransactionAmount), true}
	case "transactionSource":
		return fastField{1 << 2, &w.TransactionSource, false}
	case "transactionType":
		return fastField{1 << 3, &w.TransactionType, false}
	case "transactionId":
		return fastField{1 << 4, &w.TransactionID, false}
	case "bitReference":
		return fastField{1 << 5, &w.BitReference, false}
	case "sponsor":
		return fastField{1 << 6, &w.Sponsor, false}
	case "status":
		return fastField{1 << 7, &w.Status, false}
	case "transactionTime":
		return fastField{1 << 8, &w.TransactionTime, false}
	case "requestId":
		return fastField{1 << 9, &w.RequestID, false}
	case "timestamp":
		return fastField{1 << 10, &w.Timestamp, false}
	}
	return fastField{}
}
