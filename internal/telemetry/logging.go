package telemetry

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// LogOptions configures NewLogger. The zero value is JSON at info level on
// stderr.
type LogOptions struct {
	Format string // "json" (default) or "console"
	Level  string // debug, info (default), warn, error
	Output io.Writer
}

// NewLogger builds a zap logger whose core redacts secrets and personal data
// (see RedactingCore).
func NewLogger(opts LogOptions) (*zap.Logger, error) {
	level := zapcore.InfoLevel
	if opts.Level != "" {
		if err := level.UnmarshalText([]byte(opts.Level)); err != nil {
			return nil, fmt.Errorf("log level %q: %w", opts.Level, err)
		}
	}
	out := opts.Output
	if out == nil {
		out = os.Stderr
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	switch opts.Format {
	case "", "json":
		enc = zapcore.NewJSONEncoder(encCfg)
	case "console":
		encCfg.EncodeLevel = zapcore.CapitalLevelEncoder
		encCfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc = zapcore.NewConsoleEncoder(encCfg)
	default:
		return nil, fmt.Errorf("log format %q: want json or console", opts.Format)
	}
	// Locked: a command's stderr need not be safe for concurrent writes.
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(out)), level)
	return zap.New(RedactingCore(core)), nil
}

// isSecretKey reports whether a normalised key (see normaliseKey) names a
// secret, or a whole payload that may hold anything (a record value, an
// HTTP body). Personal-data keys are events.PersonalFieldNames, not kept
// here.
func isSecretKey(k string) bool {
	switch k {
	case "password", "clientsecret", "secret", "token", "accesstoken", "refreshtoken", "authorization", "sign",
		"privatekey", "partnerkey", "value", "body":
		return true
	}
	return strings.Contains(k, "secret") || strings.Contains(k, "password") || strings.HasSuffix(k, "token")
}

// normaliseKey lower-cases key and drops '_', '-' and '.', so that
// place_of_birth, Place-Of-Birth and placeOfBirth are one key.
func normaliseKey(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range strings.ToLower(key) {
		if r != '_' && r != '-' && r != '.' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sensitiveKeys matches field keys whose values never reach an encoder:
// secrets, and the personal-data fields of events.PersonalFields. Built
// once per RedactingCore; read-only afterwards.
type sensitiveKeys map[string]bool

func newSensitiveKeys() sensitiveKeys {
	k := sensitiveKeys{}
	for _, name := range events.PersonalFieldNames() {
		k[normaliseKey(name)] = true
	}
	return k
}

func (s sensitiveKeys) match(key string) bool {
	k := normaliseKey(key)
	return s[k] || isSecretKey(k)
}

// jwtLike matches compact JWS (three base64url parts, the first a JSON
// object) and bearer credentials wherever they appear in a string.
var jwtLike = regexp.MustCompile(`eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*|(?i)bearer\s+[A-Za-z0-9._~+/=-]+`)

// ScrubString removes token-shaped substrings from s.
func ScrubString(s string) string {
	if !strings.Contains(s, "eyJ") && !strings.Contains(strings.ToLower(s), "bearer") {
		return s
	}
	return jwtLike.ReplaceAllString(s, events.Redacted)
}

// RedactingCore wraps core so that fields whose keys name a secret or a
// personal datum (events.PersonalFields) are replaced by events.Redacted,
// and token-shaped strings are scrubbed from string and error fields and
// from the message.
func RedactingCore(core zapcore.Core) zapcore.Core {
	return redactingCore{Core: core, keys: newSensitiveKeys()}
}

type redactingCore struct {
	zapcore.Core
	keys sensitiveKeys
}

func (c redactingCore) With(fields []zapcore.Field) zapcore.Core {
	return redactingCore{Core: c.Core.With(c.keys.redact(fields)), keys: c.keys}
}

func (c redactingCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c redactingCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	e.Message = ScrubString(e.Message)
	return c.Core.Write(e, c.keys.redact(fields))
}

func (s sensitiveKeys) redact(fields []zapcore.Field) []zapcore.Field {
	out := fields
	copied := false
	set := func(i int, f zapcore.Field) {
		if !copied {
			out = append([]zapcore.Field(nil), fields...)
			copied = true
		}
		out[i] = f
	}
	for i, f := range fields {
		if s.match(f.Key) {
			set(i, zap.String(f.Key, events.Redacted))
			continue
		}
		switch f.Type {
		case zapcore.StringType:
			if s := ScrubString(f.String); s != f.String {
				set(i, zap.String(f.Key, s))
			}
		case zapcore.ErrorType:
			if err, ok := f.Interface.(error); ok && err != nil {
				if s := ScrubString(err.Error()); s != err.Error() {
					set(i, zap.String(f.Key, s))
				}
			}
		}
	}
	return out
}
