package partnertext

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// Caps, in bytes, of what a Scrubber returns.
const (
	// MaxText caps a free text (a message, a URL). The spec's messages are
	// a few words ("Bad Request", "the account has been linked"); a longer
	// text is an echo of something (a request body, a stack trace), and
	// every error event must stay far below the output record limit.
	MaxText = 256
	// MaxCode caps a code (errors.code, errorCode, name, a status). The
	// spec's longest is MemberIsNotLinkedException (26 bytes); a code is
	// matched by equality, so a longer one is not a code we know anyway.
	MaxCode = 64
	// MaxID caps an identifier or timestamp of an answer (bitReference,
	// requestId, memberCode, createdAt): the bridge's own limit on the ids
	// it accepts, events.MaxIDLen.
	MaxID = events.MaxIDLen
)

// ellipsis ends a text that was cut; it counts toward the cap.
const ellipsis = "…"

// Scrubber makes partner texts safe to publish. The zero value scrubs
// secrets, control characters and lengths, keeps no query parameter of a
// URL, and knows no personal data. Its methods never panic, whatever the
// input, and are safe for concurrent use if Personal is.
type Scrubber struct {
	// Personal, when set, replaces the personal data of the event the
	// text answers (a partner may echo a phone or a name). It runs before
	// the cap, so that a value cut in half cannot escape it.
	Personal func(string) string
	// KeepParams are the query parameters of a URL that are kept
	// (partnerprofile.Profile.ResultURLParams); their values are scrubbed
	// like any text. Default none.
	KeepParams []string
}

// Text is s as a free text: control characters removed, personal data and
// secrets replaced by events.Redacted, at most MaxText bytes.
func (c Scrubber) Text(s string) string { return c.scrub(s, MaxText) }

// Code is s as a code: like Text, capped at MaxCode.
func (c Scrubber) Code(s string) string { return c.scrub(s, MaxCode) }

// ID is s as an identifier of the partner's: like Text, capped at MaxID,
// without the personal-data pass (a member code may well be the member's
// phone number, and it is what downstream looks the member up by).
func (c Scrubber) ID(s string) string {
	if plainID(s) {
		return s
	}
	c.Personal = nil
	return c.scrub(s, MaxID)
}

// plainID reports whether s is an ID that scrub leaves as it is, which is
// what nearly every answer's ids and timestamps are: a profile of the
// bridge at 256 records in flight spent 1.6% of its CPU scrubbing them (a
// lower-case copy and a search per secret key, six fields a record). A
// word of letters, digits, '_' and '-' has no separator for a key=value
// secret, no space for a bearer or basic credential, no "://" for
// userinfo, and is a JWT only from "eyJ" on; a clock reading (digits,
// ':', '.', '+', '-', 'T', 'Z') spells none of the keywords. Within MaxID
// it is not cut. TestPlainIDOnlyWhereScrubKeeps and FuzzPlainID hold it to
// scrub's own answer.
func plainID(s string) bool {
	if len(s) > MaxID {
		return false
	}
	word, clock := true, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		digit := '0' <= c && c <= '9'
		word = word && (digit || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '-')
		clock = clock && (digit || c == ':' || c == '.' || c == '+' || c == '-' || c == 'T' || c == 'Z')
		if !word && !clock {
			return false
		}
	}
	return clock || !strings.Contains(s, "eyJ")
}

// Detail is s, a text the bridge wrote about a failure (which may quote the
// partner's codes and the causes' texts), with control characters, personal
// data and secrets removed. It is not capped: it is the bridge's own
// account, and the error event bounds its size as a whole.
func (c Scrubber) Detail(s string) string { return c.scrub(s, -1) }

// URL is s as a URL the partner gives (data.resultUrl): without userinfo,
// fragment and any query parameter but KeepParams, then scrubbed as Text. A
// text that does not parse as an absolute URL keeps only what precedes its
// first '?' or '#'.
func (c Scrubber) URL(s string) string {
	s = clean(s)
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			s = s[:i]
		}
		return c.scrub(s, MaxText)
	}
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	u.ForceQuery = false
	u.RawQuery = keepParams(u.RawQuery, c.KeepParams)
	return c.scrub(u.String(), MaxText)
}

// keepParams is the parameters of query named in keep, in their order.
func keepParams(query string, keep []string) string {
	if len(keep) == 0 || query == "" {
		return ""
	}
	var kept []string
	for p := range strings.SplitSeq(query, "&") {
		k, _, _ := strings.Cut(p, "=")
		if name, err := url.QueryUnescape(k); err == nil && slices.Contains(keep, name) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "&")
}

func (c Scrubber) scrub(s string, limit int) string {
	s = clean(s)
	if c.Personal != nil {
		s = c.Personal(s)
	}
	s = Secrets(s)
	if limit >= 0 {
		s = capBytes(s, limit)
	}
	return s
}

// clean drops invalid UTF-8 and control and format characters (Cc, Cf:
// NUL, ESC, zero-width and bidi marks). Line and tab characters become a
// space, so that "Bearer\ntoken" still reads as a bearer credential and a
// text cannot forge a second log line.
func clean(s string) string {
	if !strings.ContainsFunc(s, unclean) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToValidUTF8(s, "") {
		switch {
		case r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' || unicode.In(r, unicode.Zl, unicode.Zp):
			b.WriteByte(' ')
		case r == utf8.RuneError || unicode.In(r, unicode.Cc, unicode.Cf):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unclean(r rune) bool {
	if r < utf8.RuneSelf {
		return r < 0x20 || r == 0x7f
	}
	return r == utf8.RuneError || unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// capBytes cuts s to at most n bytes at a rune boundary, ending with
// ellipsis when cut.
func capBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < len(ellipsis) {
		return ""
	}
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// The shapes of secrets in free text. Read-only after initialisation.
// Each is tried only where a cheap search finds its keyword: Go's
// regexps have no literal prefix to skip ahead with when they ignore case,
// and a message of a few kilobytes would otherwise cost milliseconds.
var (
	// jwtLike: a base64url JSON object ("eyJ" is `{"`), alone or as the
	// first part of a JWS or JWE; also base64 with '+' and '/'.
	jwtLike = regexp.MustCompile(`eyJ[A-Za-z0-9_+/=-]{6,}(?:\.[A-Za-z0-9_+/=-]*)*`)
	// bearer: an Authorization credential of the bearer scheme. The
	// scheme's word repeated ("bearer Bearer x") is not the credential.
	bearer = regexp.MustCompile(`(?i)\bbearer(?:(?:\s+|%20|\+)bearer\b)*(?:\s+|%20|\+)[A-Za-z0-9._~+/=-]+`)
	// basic: a Basic credential; only redacted when it decodes to
	// user:password, so that "Basic information missing" survives.
	basic = regexp.MustCompile(`(?i)\bbasic(?:(?:\s+|%20|\+)basic\b)*(?:\s+|%20|\+)([A-Za-z0-9+/]+={0,2})`)
	// keyValueAt: a secret as key=value, key: value, "key":"value" (also
	// JSON inside a JSON string, \"key\":\"value\") or a query parameter,
	// at the start of the text; group 1 is the key and separator, which
	// are kept. Tried where a secretKeys entry starts a word.
	keyValueAt = regexp.MustCompile(`^(?i)((?:access_token|refresh_token|id_token|token|client_secret|secret|password|passwd|pwd|signature|sign|api_?key|authorization|private_key)` +
		`(?:\\?["'])?\s*(?:[:=]|%3A|%3D)\s*)` +
		`(?:"(?:[^"\\]|\\.)*"?|'[^']*'?|\\"(?:[^"\\]|\\[^"])*(?:\\")?|(?:bearer|basic)(?:\s+(?:bearer|basic)\b)*\s+[^\s"'&,;}<>\\]+|[^\s"'&,;}<>\\]+)`)
	// userinfo: credentials in a URL, scheme://user:pass@host.
	userinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]+@`)
)

// secretKeys are the lower-case stems that may start a keyValueAt match.
// A stem after a word character does not count ("design"), hence
// client_secret beside secret.
var secretKeys = []string{"access_token", "refresh_token", "id_token", "token", "client_secret", "secret", "passw", "pwd", "sign", "api", "authorization", "private_key"}

// Secrets is s with every token-shaped substring (JWT, bearer and basic
// credentials), secret key=value pair value and URL userinfo replaced by
// events.Redacted. It does not clean or cap s.
func Secrets(s string) string {
	// URL userinfo first: it is found by its scheme, which a bearer or
	// basic pass would take for a credential ("bearer https://u:p@h").
	// The other passes keep the words that find them, or redact their
	// matches whole.
	if strings.Contains(s, "://") && strings.Contains(s, "@") {
		s = userinfo.ReplaceAllString(s, "${1}"+events.Redacted+"@")
	}
	low := lowerASCII(s)
	if r := keyValues(s, low); r != s {
		s, low = r, lowerASCII(r)
	}
	if strings.Contains(s, "eyJ") {
		s = jwtLike.ReplaceAllString(s, events.Redacted)
		low = lowerASCII(s)
	}
	if strings.Contains(low, "bearer") {
		s = bearer.ReplaceAllString(s, "Bearer "+events.Redacted)
		low = lowerASCII(s)
	}
	if strings.Contains(low, "basic") {
		s = basic.ReplaceAllStringFunc(s, func(m string) string {
			cred := basic.FindStringSubmatch(m)[1]
			if !decodesToPair(cred) {
				return m
			}
			return "Basic " + events.Redacted
		})
	}
	return s
}

// keyValues replaces the values of keyValueAt matches, trying the regexp
// only where a secretKeys stem starts a word; low is lowerASCII(s).
func keyValues(s, low string) string {
	var starts []int
	for _, k := range secretKeys {
		for from := 0; ; {
			i := strings.Index(low[from:], k)
			if i < 0 {
				break
			}
			i += from
			if i == 0 || !wordByte(low[i-1]) {
				starts = append(starts, i)
			}
			from = i + len(k)
		}
	}
	if len(starts) == 0 {
		return s
	}
	slices.Sort(starts)
	var b strings.Builder
	// value is where the last redacted value starts, at where it ends.
	value, at := 0, 0
	for _, i := range starts {
		if i < value && i < at {
			continue // inside the key part of the last match
		}
		m := keyValueAt.FindStringSubmatchIndex(s[i:])
		if m == nil {
			continue
		}
		if i < at {
			// A key inside the value just redacted ("token= \"id_token\":
			// \"…\"": the first value is the next key) has a value of its
			// own, which may run past the first; the redaction covers both.
			if i >= value {
				at = max(at, i+m[1])
			}
			continue
		}
		b.WriteString(s[at : i+m[3]])
		b.WriteString(events.Redacted)
		value, at = i+m[3], i+m[1]
	}
	if at == 0 {
		return s
	}
	b.WriteString(s[at:])
	return b.String()
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c >= 'A' && c <= 'Z'
}

// lowerASCII lower-cases the ASCII letters of s only, so that byte
// offsets stay those of s. A text with no upper-case letter is returned
// as it is: most of what the partner sends (ids, timestamps, codes) costs
// no copy then.
func lowerASCII(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return 'A' <= r && r <= 'Z' }) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// decodesToPair reports whether cred is base64 of "user:password".
func decodesToPair(cred string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(cred); err == nil && strings.Contains(string(b), ":") {
			return true
		}
	}
	return false
}
