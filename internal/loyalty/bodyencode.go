package loyalty

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// The bodies of the hot path's writes and lookups (accrual, redemption,
// lookup) are appended field by field instead of by json.Marshal.
//
// Why: the CPU profile of loyalty-bench (50,000 accruals, default
// scenario) showed encoding/json.Marshal at 2.9% of the bridge's CPU,
// most of it reflection over AccrualRequest. The appended body costs
// about half as much (BenchmarkEncodeAccrualBody), most of what is left
// being json.Valid over transactionDes, which json.Marshal runs too.
//
// Why it is exact: each append function writes the fields json.Marshal
// writes, in its order (a struct's own fields by index, an embedding's
// shadowed field dropped, omitempty as json.Marshal reads it), strings as
// its string encoder does (HTML-safe: <, > and & escaped, U+2028 and
// U+2029 escaped, invalid UTF-8 as U+FFFD) and float64 as it formats
// them. A value it does not write itself — a raw JSON field json.Marshal
// would change (white space to drop, characters to escape) or refuse, a
// float it refuses — makes it decline, and the whole body goes to
// json.Marshal, so its bytes and its errors are json.Marshal's.
// FuzzEncodeBody compares the two on arbitrary requests.

// encodeBody is json.Marshal(body), without reflection for the hot
// path's bodies.
func encodeBody(body any) ([]byte, error) {
	if b, ok := appendBody(body); ok {
		return b, nil
	}
	return json.Marshal(body)
}

// appendBody is json.Marshal(body) for the bodies it knows and values it
// writes itself; false for any other.
func appendBody(body any) ([]byte, bool) {
	switch b := body.(type) {
	case AccrualRequest:
		return appendAccrual(make([]byte, 0, 256), b)
	case LookupRequest:
		return appendLookup(make([]byte, 0, 96), b), true
	case json.RawMessage:
		// A body encoded already (EncodeRedemption): json.Marshal would
		// give it back as it is.
		return b, plainJSON(b)
	}
	return nil, false
}

// marshalRedemption is json.Marshal(b), without reflection unless a
// value needs it.
func marshalRedemption(b redemptionBody) ([]byte, error) {
	if out, ok := appendRedemption(make([]byte, 0, 512), b); ok {
		return out, nil
	}
	return json.Marshal(b)
}

func appendAccrual(dst []byte, r AccrualRequest) ([]byte, bool) {
	b := append(dst, `{"loyaltyId":`...)
	b = appendString(b, r.LoyaltyID)
	b = append(b, `,"transactionId":`...)
	b = appendString(b, r.TransactionID)
	if r.ItemID != "" {
		b = append(b, `,"itemId":`...)
		b = appendString(b, r.ItemID)
	}
	if len(r.TransactionDes) > 0 {
		if !plainJSON(r.TransactionDes) {
			return nil, false
		}
		b = append(b, `,"transactionDes":`...)
		b = append(b, r.TransactionDes...)
	}
	date, err := r.TransactionDate.MarshalJSON()
	if err != nil || !plainJSON(date) {
		return nil, false
	}
	b = append(b, `,"transactionDate":`...)
	b = append(b, date...)
	b = append(b, `,"transactionAmount":`...)
	b, ok := appendFloat(b, r.TransactionAmount)
	if !ok {
		return nil, false
	}
	b = append(b, `,"transactionCurrency":`...)
	b = appendString(b, r.TransactionCurrency)
	if len(r.ExtraData) > 0 {
		if !plainJSON(r.ExtraData) {
			return nil, false
		}
		b = append(b, `,"extraData":`...)
		b = append(b, r.ExtraData...)
	}
	return append(b, '}'), true
}

func appendLookup(dst []byte, r LookupRequest) []byte {
	b := append(dst, `{"loyaltyId":`...)
	b = appendString(b, r.LoyaltyID)
	if r.BitReference != "" {
		b = append(b, `,"bitReference":`...)
		b = appendString(b, r.BitReference)
	}
	if r.TransactionID != "" {
		b = append(b, `,"transactionId":`...)
		b = appendString(b, r.TransactionID)
	}
	return append(b, '}')
}

// appendRedemption writes redemptionBody as json.Marshal orders it: the
// embedded request's fields, its transactionDate shadowed by the body's
// own, which comes last.
func appendRedemption(dst []byte, r redemptionBody) ([]byte, bool) {
	if !plainJSON(r.TransactionDate) {
		return nil, false
	}
	b := append(dst, `{"transactionId":`...)
	b = appendString(b, r.TransactionID)
	if r.TransactionDes != "" {
		b = append(b, `,"transactionDes":`...)
		b = appendString(b, r.TransactionDes)
	}
	b = append(b, `,"transactionAmount":`...)
	b, ok := appendFloat(b, r.TransactionAmount)
	if !ok {
		return nil, false
	}
	b = append(b, `,"loyaltyId":`...)
	b = appendString(b, r.LoyaltyID)
	b = append(b, `,"usedPoint":`...)
	b = strconv.AppendInt(b, r.UsedPoint, 10)
	b = append(b, `,"sign":`...)
	b = appendString(b, r.Sign)
	b = append(b, `,"transactionDate":`...)
	b = append(b, r.TransactionDate...)
	return append(b, '}'), true
}

// appendFloat writes f as json.Marshal does (the shortest text that
// reads back as f, in exponent form below 1e-6 and from 1e21 on, its
// exponent unpadded); false for NaN and infinities, which it refuses.
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		// e-07 is written e-7.
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, true
}

// appendString writes s quoted as json.Marshal does by default: \" \\ \b
// \f \n \r \t, other control characters and <, > and & as \u00XX, U+2028
// and U+2029 as \u2028 and \u2029, each byte of invalid UTF-8 as \ufffd,
// everything else as it is.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plainJSON reports whether raw is valid JSON that json.Marshal writes
// as it is (a json.RawMessage or a MarshalJSON's result): no white space
// outside its strings to drop, no <, > or & and no U+2028 or U+2029 to
// escape.
func plainJSON(raw []byte) bool {
	inString, escaped := false, false
	for i, c := range raw {
		switch {
		case c == '<' || c == '>' || c == '&':
			return false
		case c == 0xe2 && i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xa8 || raw[i+2] == 0xa9):
			return false
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	// Only valid JSON reaches here with inString right; invalid JSON is
	// json.Marshal's to refuse.
	return json.Valid(raw)
}
